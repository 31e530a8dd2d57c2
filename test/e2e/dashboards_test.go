//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/test/dashboards"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// TestDashboardsNameServedMetrics scrapes the running manager and an etcd
// member, with a cluster of three members, a verified backup, a PodSet, a
// Queue and a roll in place, and checks that every metric that
// config/grafana's dashboards query is served by one of them. Each metric
// is checked: none is exempt for lack of an event to make it appear.
func TestDashboardsNameServedMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	boards, err := dashboards.Load(cluster.Root + "/config/grafana")
	if err != nil || len(boards) == 0 {
		t.Fatalf("loading config/grafana: %d dashboards, %v", len(boards), err)
	}

	mustCreate(t, backupClaim(ns))
	e := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dash"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Version: cluster.Settings.EtcdVersion,
			DeletionPolicy: etcdv1alpha1.DeletionDelete},
	}}
	mustCreate(t, e.EtcdCluster)
	mustCreate(t, sleepers(ns, "web", 1, false))
	mustCreate(t, &sqsv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec:       sqsv1alpha1.QueueSpec{QueueName: fmt.Sprintf("e2e-dash-%d", time.Now().UnixNano())},
	})
	e.waitReady(t, 3)
	mustCreate(t, newBackup(ns, "dash-1", "dash",
		etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}}, etcdv1alpha1.CompressionNone))
	cluster.WaitReady(t, 5*time.Minute, ns, "etcdbackup/dash-1")
	cluster.WaitReady(t, time.Minute, ns, "queue/orders")
	cluster.WaitReady(t, podSetTimeout, ns, "podset/web")

	// A token that the manager's metrics endpoint accepts: a ServiceAccount
	// bound to tend-metrics-reader.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	mustCreate(t, sa)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tend-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}
	mustCreate(t, binding)
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, binding) })
	token := strings.TrimSpace(cluster.Kubectl(t, "create", "token", "-n", ns, "scraper"))

	served := map[string]bool{}
	var managers corev1.PodList
	if err := cluster.Client.List(ctx, &managers, client.InNamespace(framework.OperatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "tend", "app.kubernetes.io/component": "manager"}); err != nil {
		t.Fatal(err)
	}
	if len(managers.Items) != 1 || managers.Items[0].Status.PodIP == "" {
		t.Fatalf("want one running manager pod, have %d", len(managers.Items))
	}
	managerURL := "https://" + net.JoinHostPort(managers.Items[0].Status.PodIP, "8443") + "/metrics"
	// The state metrics are read from the cache at each scrape: scrape
	// until the manager serves the family, and keep what it served.
	scrapeManagerFor := func(timeout time.Duration, family string) {
		t.Helper()
		var manager map[string]bool
		cluster.WaitFor(t, timeout, "the manager to export "+family, func(_ context.Context) (bool, error) {
			body, err := framework.Scrape(managerURL, token)
			if err != nil {
				return false, err
			}
			manager = dashboards.Families(body)
			return manager[family], nil
		})
		maps.Copy(served, manager)
	}
	scrapeManagerFor(time.Minute, "tend_etcdcluster_last_verified_backup_timestamp_seconds")
	// A member's own metrics, before the roll below restarts it.
	members, err := cluster.EtcdMemberPods(ctx, ns, "dash")
	if err != nil || len(members) == 0 {
		t.Fatalf("the members' pods: %d, %v", len(members), err)
	}
	body, err := framework.Scrape("http://"+net.JoinHostPort(members[0].Status.PodIP, "2381")+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(served, dashboards.Families(body))
	// tend_etcdcluster_roll_members exists only while a roll runs: a new
	// pod annotation rolls the members, and the manager exports the gauge
	// from the roll's start until its check Job passes.
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.PodTemplate.Annotations = map[string]string{"e2e.tend.dev/roll": "dashboards"}
	})
	scrapeManagerFor(2*time.Minute, "tend_etcdcluster_roll_members")

	checked := map[string]bool{}
	for file, d := range boards {
		for _, expr := range d.Exprs() {
			names, err := dashboards.MetricNames(expr)
			if err != nil {
				t.Errorf("%s: %v", file, err)
			}
			for _, name := range names {
				checked[name] = true
				if _, ok := dashboards.Family(name, served); !ok {
					t.Errorf("%s queries %s, which neither the manager nor an etcd member serves (%s)", file, name, expr)
				}
			}
		}
	}
	t.Logf("%d metric families served; %d dashboards checked, naming %d metrics", len(served), len(boards), len(checked))
}
