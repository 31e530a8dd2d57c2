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
	os.Exit(cluster.Run(m))
}
