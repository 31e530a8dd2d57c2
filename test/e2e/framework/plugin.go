//go:build e2e

package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// pluginBuild builds kubectl-tend once per test binary.
var pluginBuild struct {
	once sync.Once
	dir  string
	err  error
}

// KubectlTend runs "kubectl tend ARGS" as a user would: kubectl finds the
// plugin, built from the tree, on the PATH. It returns stdout and, when
// the command fails, an error holding stderr.
func (c *Cluster) KubectlTend(t testing.TB, args ...string) (string, error) {
	t.Helper()
	pluginBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "kubectl-tend-")
		if err != nil {
			pluginBuild.err = err
			return
		}
		// Built as the tend image's copy is (hack/cluster/images.sh), so
		// that the build cache already holds its packages.
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "kubectl-tend"), "./cmd/kubectl-tend")
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginBuild.err = fmt.Errorf("building kubectl-tend: %w: %s", err, out)
			return
		}
		pluginBuild.dir = dir
	})
	if pluginBuild.err != nil {
		t.Fatal(pluginBuild.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*kubectlTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// kubectl takes no flag before a plugin's name: the kubeconfig comes
	// from the environment, which the plugin inherits.
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"tend"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Settings.Kubeconfig,
		"PATH="+pluginBuild.dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl tend %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
