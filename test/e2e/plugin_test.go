//go:build e2e

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/plugin"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the plugin's output")

// TestKubectlTend runs the kubectl plugin as a user does, through kubectl,
// on a PodSet and an EtcdCluster: status (compared with golden output, its
// volatile fields masked), backup --wait, pause and resume, report, restore
// --wait and version.
func TestKubectlTend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	tend := func(args ...string) string {
		t.Helper()
		out, err := cluster.KubectlTend(t, append([]string{"-n", ns}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	mask := masker(ns)

	mustCreate(t, sleepers(ns, "web", 1, true))
	mustCreate(t, backupClaim(ns))
	e := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](1), Version: cluster.Settings.EtcdVersion,
			Backup: &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}}},
		},
	}}
	mustCreate(t, e.EtcdCluster)
	mustCreate(t, &sqsv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec:       sqsv1alpha1.QueueSpec{QueueName: fmt.Sprintf("e2e-plugin-%d", rand.Uint32())},
	})

	cluster.WaitReady(t, podSetTimeout, ns, "podset/web")
	byKind := tend("status", "podset/web")
	golden(t, "podset-status", mask(byKind))
	if bare := tend("status", "web"); mask(bare) != mask(byKind) {
		t.Errorf("status web and status podset/web differ:\n%s\n%s", bare, byKind)
	}
	// A paused PodSet replaces no pod; resumed, it does.
	tend("pause", "web")
	cluster.WaitFor(t, time.Minute, "the PodSet to say it is paused", func(ctx context.Context) (bool, error) {
		got := &appsv1alpha1.PodSet{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, got); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionProgressing)
		return c != nil && c.Reason == appsv1alpha1.ReasonPaused && c.ObservedGeneration == got.Generation, nil
	})
	if err := cluster.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{"apps.tend.dev/podset": "web"}); err != nil {
		t.Fatal(err)
	}
	// Once the status counts no pod, the pass that saw the pod go is done:
	// unpaused, that pass would have created one.
	cluster.WaitFor(t, time.Minute, "the paused PodSet to count no pod", func(ctx context.Context) (bool, error) {
		got := &appsv1alpha1.PodSet{}
		err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, got)
		return err == nil && got.Status.Replicas == 0, err
	})
	var pods corev1.PodList
	if err := cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"apps.tend.dev/podset": "web"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("the paused PodSet has a new pod %s; want none made", p.Name)
		}
	}
	if out := tend("resume", "podset/web"); out != "podset.apps.tend.dev/web resumed\n" {
		t.Errorf("resume printed %q", out)
	}
	cluster.WaitReady(t, podSetTimeout, ns, "podset/web")

	cluster.WaitReady(t, time.Minute, ns, "queue/orders")
	golden(t, "queue-status", mask(tend("status", "queue/orders")))

	e.waitReady(t, 1)
	cluster.WaitReady(t, 5*time.Minute, ns, "etcdcluster/demo")
	if out := tend("backup", "demo", "--name", "demo-now", "--wait"); !strings.Contains(out, "demo-now is Ready") {
		t.Errorf("backup --wait printed %q; want it to end with the backup Ready", out)
	}
	golden(t, "etcdcluster-status", mask(tend("status", "etcdcluster/demo")))
	var st plugin.Status
	if err := json.Unmarshal([]byte(tend("status", "demo", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 1 || st.Members[0].Role != "leader" || len(st.Certificates) != 4 || len(st.Backups) != 1 || st.Backups[0].Verification == "" {
		t.Errorf("status -o json: %+v; want 1 leader, 4 certificates, the backup demo-now verified", st)
	}

	// pause and resume only flip spec.paused; the operator does the rest.
	if out := tend("pause", "etcdcluster/demo"); out != "etcdcluster.etcd.tend.dev/demo paused\n" {
		t.Errorf("pause printed %q", out)
	}
	if got, err := e.get(ctx); err != nil || !got.Spec.Paused {
		t.Fatalf("after pause, spec.paused is %v (%v); want true", got.Spec.Paused, err)
	}
	tend("resume", "demo")
	if got, err := e.get(ctx); err != nil || got.Spec.Paused {
		t.Fatalf("after resume, spec.paused is %v (%v); want false", got.Spec.Paused, err)
	}
	cluster.WaitReady(t, 2*time.Minute, ns, "etcdcluster/demo")

	archive := filepath.Join(t.TempDir(), "report.tar.gz")
	tend("report", "demo", "--file", archive)
	checkReport(t, archive)

	if _, err := cluster.KubectlTend(t, "-n", ns, "restore", "demo", "--backup", "demo-now"); err == nil || !strings.Contains(err.Error(), "--confirm-overwrite") {
		t.Errorf("restore without --confirm-overwrite: %v; want a refusal", err)
	}
	if out := tend("restore", "demo", "--backup", "demo-now", "--confirm-overwrite", "--name", "back", "--wait"); !strings.Contains(out, "back is Ready") {
		t.Errorf("restore --wait printed %q; want the restore Ready", out)
	}
	// The controller marks the EtcdRestore Ready within its pass and writes
	// the EtcdCluster's status at the pass's end, a separate write: the
	// cluster names the backup soon after, not at once.
	cluster.WaitFor(t, time.Minute, "the EtcdCluster's status.restoredFrom to name the backup demo-now", func(ctx context.Context) (bool, error) {
		restored, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		rf := restored.Status.RestoredFrom
		return rf != nil && rf.Backup == "demo-now", nil
	})

	if out := tend("version"); !regexp.MustCompile(`(?m)^kubectl-tend: \S+\noperator: tend-system/tend-manager \S+$`).MatchString(out) {
		t.Errorf("version printed %q", out)
	}
}

// checkReport opens the support bundle and checks what it holds: the
// cluster, its objects and logs, the manager's log, and no Secret value.
func checkReport(t *testing.T, archive string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(data)
	}
	for _, name := range []string{
		"report/objects/EtcdCluster-demo.yaml", "report/objects/StatefulSet-demo.yaml",
		"report/objects/EtcdBackup-demo-now.yaml", "report/objects/Secret-demo-client-tls.yaml",
		"report/events.yaml", "report/logs/demo-0/etcd.log",
	} {
		if files[name] == "" {
			t.Errorf("the report has no %s, or it is empty", name)
		}
	}
	manager := false
	for name, data := range files {
		manager = manager || strings.HasPrefix(name, "report/logs/manager/")
		// PEM, base64-encoded as a Secret's data holds it.
		if strings.Contains(data, "LS0tLS1CRUdJTi") || strings.Contains(data, "PRIVATE KEY") {
			t.Errorf("%s holds a certificate or key: Secrets must be redacted", name)
		}
	}
	if !manager {
		t.Errorf("the report has no manager log; errors.txt says %q", files["report/errors.txt"])
	}
	if !strings.Contains(files["report/objects/Secret-demo-client-tls.yaml"], "tls.key: '<redacted: ") {
		t.Errorf("the client Secret is not redacted as expected:\n%s", files["report/objects/Secret-demo-client-tls.yaml"])
	}
}

// masker replaces what changes from run to run in the plugin's report:
// times, ages, sizes, counts, generated names, the namespace and the
// etcd version, and the warning Events, which depend on timing.
func masker(ns string) func(string) string {
	rules := []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(regexp.QuoteMeta(ns)), "NS"},
		{regexp.MustCompile(regexp.QuoteMeta(cluster.Settings.EtcdVersion)), "VERSION"},
		{regexp.MustCompile(`(?s)\n(No warning Events\.\n|Warning Events.*)$`), "\nWARNINGS\n"},
		{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "TIME"},
		{regexp.MustCompile(`\b\d+(\.\d+)? (B|KiB|MiB)\b`), "SIZE"},
		{regexp.MustCompile(`\b\d+[smhdy](\d+[smh])?\b`), "AGE"},
		{regexp.MustCompile(`web-[a-z0-9]{5}\b`), "web-ID"},
		{regexp.MustCompile(`e2e-plugin-\d+`), "QUEUE"},
		{regexp.MustCompile(regexp.QuoteMeta(cluster.Settings.MotoURL)), "MOTO"},
		{regexp.MustCompile(`(?m)^(demo-now +\S+ +\S+ +\S+ +\S+ +)\d+( +hash matches, )\d+`), "${1}REV${2}N"},
	}
	return func(s string) string {
		for _, r := range rules {
			s = r.re.ReplaceAllString(s, r.with)
		}
		// Columns are as wide as their widest masked value: squeeze runs of
		// spaces, so that a width change is not a difference.
		return regexp.MustCompile(` {2,}`).ReplaceAllString(s, "  ")
	}
}

// golden compares got with testdata/plugin/NAME.golden, or writes it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "plugin", name+".golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("kubectl tend's output differs from %s (rerun with -args -update to accept it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
