package loopback

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestPortIsFreeOnLoopback(t *testing.T) {
	g := NewWithT(t)
	addr := TestAddr(t)
	g.Expect(addr).To(HavePrefix("127.0.0.1:"))
	l, err := net.Listen("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred(), "the port was free")
	_ = l.Close()
	g.Expect(TestPort(t)).To(BeNumerically(">", 0))
}

func TestGet(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = fmt.Fprint(w, "body")
	}))
	defer srv.Close()
	body, err := Get(srv.URL + "/ok")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal("body"))
	body, err = Get(srv.URL + "/bad")
	g.Expect(err).To(MatchError(ContainSubstring("503")))
	g.Expect(body).To(Equal("body"), "the body of a refusal says why")
}
