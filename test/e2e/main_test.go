//go:build e2e

// Package e2e holds Tend's end-to-end tests, on the local cluster (see
// test/e2e/framework and docs/cluster.md). Run them with make test-e2e, or
// go test -tags e2e ./test/e2e/ as root.
package e2e

import (
	"os"
	"testing"

	"github.com/tend-dev/tend/test/e2e/framework"
)

// cluster is the local cluster, set up once for all the package's tests.
var cluster = framework.New()

func TestMain(m *testing.M) {
	// The tests that read what the agents stored (the archive) do it with
	// the agents' own code, which takes the AWS SDK's default credentials:
	// moto's, the only store these tests reach.
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
	os.Exit(cluster.Run(m))
}
