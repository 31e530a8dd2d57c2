package logtail

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestBufferKeepsTheTail(t *testing.T) {
	g := NewWithT(t)
	b := New(8)
	for _, s := range []string{"abc", "defgh", "ijk"} {
		n, err := b.Write([]byte(s))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(len(s)))
	}
	g.Expect(b.String()).To(Equal("defghijk"))
}
