//go:build e2e

package framework

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// E2ELabel marks every namespace the framework creates, so that the next
// run deletes the leftovers of one that was killed (Start), and they are
// easy to find: kubectl get ns -l tend.dev/e2e.
const E2ELabel = "tend.dev/e2e"

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for the calling test and deletes it when the
// test ends. Its name starts with the test's name. When the test has failed,
// the namespace's state and the cluster's logs are saved first (see
// CollectArtifacts). The test's running time counts from here (see
// timesFile).
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	c.times.start(t)
	prefix := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-" + prefix + "-",
		Labels:       map[string]string{E2ELabel: "true"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.CollectArtifacts(t, ns.Name)
		}
		// Deletion goes on in the background: names are unique, and the
		// next test need not wait for the garbage collector.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Client.Delete(ctx, ns, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting the namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}
