package aws

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/moto"
)

// server is the moto_server that this package's tests share.
var server = moto.New()

func TestMain(m *testing.M) { os.Exit(server.Run(m)) }

// callCtx is the context of a test's calls: every call needs a deadline.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newLimiters returns generous buckets, for tests that are not about them.
func newLimiters(t *testing.T) *Limiters {
	l, err := NewLimiters(LimiterOptions{QPS: 1000, Burst: 1000})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return l
}

// newSQS returns an SQS client on LoadConfig(conn).
func newSQS(t *testing.T, conn Connection) *sqs.Client {
	cfg, err := LoadConfig(callCtx(t), conn)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return sqs.NewFromConfig(cfg)
}

// direct returns a client that talks to the shared moto_server whatever the
// environment says, to observe what a test did.
func direct(t *testing.T) *sqs.Client {
	return newSQS(t, Connection{
		Region:      moto.Region,
		EndpointURL: server.URL,
		Credentials: &StaticCredentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
		Limiters:    newLimiters(t),
	})
}
