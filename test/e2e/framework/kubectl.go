//go:build e2e

package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kubectlTimeout bounds one kubectl call of a test.
const kubectlTimeout = 2 * time.Minute

// Kubectl runs the toolchain's kubectl as the cluster's administrator and
// returns its stdout. The test fails at once when kubectl fails.
func (c *Cluster) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	out, err := c.kubectlOutput(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// KubectlErr runs kubectl as Kubectl does but returns its error, for a test
// that expects kubectl to fail (a rejected object, say). The error holds
// kubectl's stderr.
func (c *Cluster) KubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	return c.kubectlOutput(ctx, args...)
}

func (c *Cluster) kubectlOutput(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.Settings.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// WaitReady runs kubectl wait --for=condition=Ready on object (such as
// podset/web) in namespace ns, as a user or a script would: it returns
// once the Ready condition of the object's latest generation is True, and
// fails the test when timeout passes first.
func (c *Cluster) WaitReady(t testing.TB, timeout time.Duration, ns, object string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+kubectlTimeout)
	defer cancel()
	if _, err := c.kubectlOutput(ctx, "wait", "-n", ns, "--for=condition=Ready", "--timeout="+timeout.String(), object); err != nil {
		out, _ := c.kubectlOutput(context.Background(), "get", "-n", ns, object, "-o", "jsonpath={.status.conditions}")
		t.Fatalf("%v; its conditions: %s", err, out)
	}
}
