//go:build e2e

package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// notFileName matches what a test's name may hold but a file name should not
// (subtests add a slash).
var notFileName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// componentLogLines is how much of each host component's log is kept: the
// end, where the failure is.
const componentLogLines = 5000

// nameResources caches the list of namespaced resource kinds.
var nameResources struct {
	once  sync.Once
	names string
	err   error
}

// CollectArtifacts saves what explains a failure of test t into a directory
// of its own under the artifacts directory, and logs where:
//   - namespace/: every object of namespace ns (and of the operator's
//     namespace), as YAML and as a table, its events, and pod descriptions;
//   - logs/: every container log of those namespaces, the previous
//     instance's too;
//   - components/: the end of each host component's log (kubelet,
//     containerd, kube-apiserver, ...) and the node's description.
//
// Namespace calls it for a failed test; a test may call it itself. It never
// fails the test further: what cannot be saved is noted in the directory.
func (c *Cluster) CollectArtifacts(t testing.TB, ns string) {
	t.Helper()
	dir := filepath.Join(c.artifacts, notFileName.ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("e2e: cannot save artifacts: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var notes bytes.Buffer
	for _, n := range []string{ns, OperatorNamespace} {
		c.saveNamespace(ctx, filepath.Join(dir, "namespace", n), n, &notes)
		c.saveLogs(ctx, filepath.Join(dir, "logs", n), n, &notes)
	}
	c.saveComponents(ctx, filepath.Join(dir, "components"), &notes)
	if notes.Len() > 0 {
		_ = os.WriteFile(filepath.Join(dir, "NOT-COLLECTED.txt"), notes.Bytes(), 0o644)
	}
	t.Logf("e2e: the cluster's state and logs at the failure are in %s", dir)
}

func (c *Cluster) saveNamespace(ctx context.Context, dir, ns string, notes io.Writer) {
	nameResources.once.Do(func() {
		var out string
		out, nameResources.err = c.kubectlOutput(ctx, "api-resources", "--namespaced", "--verbs=list", "-o", "name")
		nameResources.names = strings.Join(strings.Fields(out), ",")
	})
	if nameResources.err != nil {
		fmt.Fprintf(notes, "listing the resource kinds: %v\n", nameResources.err)
		return
	}
	c.saveKubectl(ctx, filepath.Join(dir, "objects.yaml"), notes, "get", nameResources.names, "-n", ns, "-o", "yaml", "--ignore-not-found")
	c.saveKubectl(ctx, filepath.Join(dir, "objects.txt"), notes, "get", nameResources.names, "-n", ns, "-o", "wide", "--ignore-not-found")
	c.saveKubectl(ctx, filepath.Join(dir, "events.txt"), notes, "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
	c.saveKubectl(ctx, filepath.Join(dir, "pods-described.txt"), notes, "describe", "pods", "-n", ns)
}

// saveLogs saves the log of every container of every pod in ns, and of the
// previous instance of restarted containers.
func (c *Cluster) saveLogs(ctx context.Context, dir, ns string, notes io.Writer) {
	pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(notes, "listing the pods of %s: %v\n", ns, err)
		return
	}
	for _, pod := range pods.Items {
		for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			base := filepath.Join(dir, pod.Name+"_"+st.Name)
			c.saveLog(ctx, base+".log", notes, pod, st.Name, false)
			if st.RestartCount > 0 {
				c.saveLog(ctx, base+".previous.log", notes, pod, st.Name, true)
			}
		}
	}
}

func (c *Cluster) saveLog(ctx context.Context, file string, notes io.Writer, pod corev1.Pod, container string, previous bool) {
	data, err := c.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
	if err != nil {
		fmt.Fprintf(notes, "logs of %s/%s %s: %v\n", pod.Namespace, pod.Name, container, err)
		return
	}
	writeFile(file, data, notes)
}

// saveComponents saves the end of every host component's log and the node.
func (c *Cluster) saveComponents(ctx context.Context, dir string, notes io.Writer) {
	logs, err := filepath.Glob(filepath.Join(c.Settings.LogDir, "*.log"))
	if err != nil || len(logs) == 0 {
		fmt.Fprintf(notes, "no component logs in %s (%v)\n", c.Settings.LogDir, err)
	}
	for _, f := range logs {
		data, err := tail(f, componentLogLines)
		if err != nil {
			fmt.Fprintf(notes, "reading %s: %v\n", f, err)
			continue
		}
		writeFile(filepath.Join(dir, filepath.Base(f)), data, notes)
	}
	c.saveKubectl(ctx, filepath.Join(dir, "node-described.txt"), notes, "describe", "node", c.Settings.NodeName)
}

func (c *Cluster) saveKubectl(ctx context.Context, file string, notes io.Writer, args ...string) {
	out, err := c.kubectlOutput(ctx, args...)
	if err != nil {
		fmt.Fprintf(notes, "kubectl %s: %v\n", strings.Join(args, " "), err)
	}
	writeFile(file, []byte(out), notes)
}

func writeFile(name string, data []byte, notes io.Writer) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		fmt.Fprintf(notes, "%v\n", err)
		return
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		fmt.Fprintf(notes, "%v\n", err)
	}
}

// tail returns the last n lines of a file.
func tail(name string, n int) ([]byte, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, nil), nil
}
