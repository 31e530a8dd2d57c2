package queue

import (
	"flag"
	"io"
	"testing"

	. "github.com/onsi/gomega"
)

func TestEndpointAllowList(t *testing.T) {
	list := []string{
		"https://sqs.internal.example.com",
		"http://127.0.0.1:4566",
		"http://moto.test:*",
		"https://gateway.example.com/sqs/",
		"http://[::1]:9324",
	}
	tests := []struct {
		endpoint string
		want     bool
	}{
		// Scheme, host and port.
		{"https://sqs.internal.example.com", true},
		{"https://sqs.internal.example.com/", true},
		{"https://sqs.internal.example.com:443", true},
		{"https://SQS.Internal.Example.com", true},
		{"HTTPS://sqs.internal.example.com", true},
		{"http://sqs.internal.example.com", false},
		{"https://sqs.internal.example.com:8443", false},
		{"https://a.sqs.internal.example.com", false},
		{"https://sqs.internal.example.com.evil.net", false},
		{"https://sqs.internal.example.com.", false},
		{"http://127.0.0.1:4566", true},
		{"http://127.0.0.1:4566/", true},
		{"http://127.0.0.1", false},
		{"http://127.0.0.1:4567", false},
		{"http://localhost:4566", false},
		{"http://[::1]:9324", true},
		{"http://[::1]:9325", false},
		// An entry's port * allows any port, the default one included.
		{"http://moto.test:5000", true},
		{"http://moto.test", true},
		{"https://moto.test:5000", false},
		// Paths: a prefix at a / boundary.
		{"https://gateway.example.com/sqs", true},
		{"https://gateway.example.com/sqs/eu-west-1", true},
		{"https://gateway.example.com/sqsx", false},
		{"https://gateway.example.com/", false},
		{"https://gateway.example.com/sqs/../admin", false},
		{"https://gateway.example.com/sqs/%2e%2e/admin", false},
		{"https://gateway.example.com/sqs/./x", false},
		// What no entry can allow.
		{"", false},
		{"127.0.0.1:4566", false},
		{"ftp://127.0.0.1:4566", false},
		{"http://user:pass@127.0.0.1:4566", false},
		{"http://127.0.0.1:4566/?x=1", false},
		{"http://127.0.0.1:4566/#x", false},
		{`http://127.0.0.1:4566\@evil.net`, false},
		{"http://169.254.169.254/latest/meta-data", false},
	}
	l, err := ParseEndpointAllowList(list)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			NewWithT(t).Expect(l.Allows(tt.endpoint)).To(Equal(tt.want))
		})
	}

	t.Run("the empty list allows nothing", func(t *testing.T) {
		g := NewWithT(t)
		var empty EndpointAllowList
		g.Expect(empty.Allows("http://127.0.0.1:4566")).To(BeFalse())
		g.Expect(empty.Allows("https://sqs.us-east-1.amazonaws.com")).To(BeFalse())
	})
}

func TestParseEndpointAllowListRefusesWhatItCannotMatch(t *testing.T) {
	for _, entry := range []string{
		"", "127.0.0.1:4566", "sqs.example.com", "ftp://host", "http://", "http://:80",
		"http://user@host", "http://host/?q", "http://host/#f", "http://*.example.com",
		"http://host:port", "http://host/a/../b",
	} {
		t.Run(entry, func(t *testing.T) {
			_, err := ParseEndpointAllowList([]string{entry})
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("--sqs-allowed-endpoints")))
		})
	}
}

func TestAllowedEndpointsFlag(t *testing.T) {
	g := NewWithT(t)
	opts := DefaultOptions()
	g.Expect(opts.AllowedEndpoints).To(BeEmpty(), "per-Queue endpoints are refused by default")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	opts.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--sqs-allowed-endpoints=http://127.0.0.1:4566, https://sqs.internal.example.com",
		"--sqs-allowed-endpoints=http://moto.test:*",
	})).To(Succeed())
	g.Expect(opts.AllowedEndpoints).To(Equal([]string{"http://127.0.0.1:4566", "https://sqs.internal.example.com", "http://moto.test:*"}))

	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--sqs-allowed-endpoints=127.0.0.1:4566"})).To(MatchError(ContainSubstring("127.0.0.1:4566")))
}
