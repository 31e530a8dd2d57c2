//go:build e2e

package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// As test/e2e, the suite spells out the names and labels that the
// EtcdCluster contract promises rather than importing the controller's.
const (
	etcdClusterLabel = "etcd.tend.dev/cluster"
	etcdCallTimeout  = 10 * time.Second
	writerPrefix     = "writer/"
	// etcdTimeout bounds a wait for the cluster to settle after a kill.
	etcdTimeout = 5 * time.Minute
)

// etcdHandle is one EtcdCluster of a scenario.
type etcdHandle struct {
	Namespace, Name string
}

func (e *etcdHandle) get(ctx context.Context) (*etcdv1alpha1.EtcdCluster, error) {
	ec := &etcdv1alpha1.EtcdCluster{}
	return ec, cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, ec)
}

// serviceEndpoint is the client Service's URL, status.clientEndpoint.
func (e *etcdHandle) serviceEndpoint() string {
	return framework.EtcdServiceEndpoint(e.Namespace, e.Name)
}

// memberHost is member's own DNS name, through the peer Service.
func (e *etcdHandle) memberHost(member string) string {
	return framework.EtcdMemberHost(e.Namespace, e.Name, member)
}

func (e *etcdHandle) memberEndpoint(member string) string {
	return "https://" + e.memberHost(member) + ":2379"
}

func (e *etcdHandle) clientTLS(t *testing.T) *tls.Config {
	t.Helper()
	return cluster.SecretTLS(t, e.Namespace, e.Name+"-client-tls")
}

// hostsNow maps the cluster's DNS names to the addresses this machine
// reaches, and returns the members with an IP (framework.EtcdHosts).
func (e *etcdHandle) hostsNow(ctx context.Context) (map[string]string, []string, error) {
	return cluster.EtcdHosts(ctx, e.Namespace, e.Name)
}

// pods lists the member pods, sorted (framework.EtcdMemberPods).
func (e *etcdHandle) pods(ctx context.Context) ([]corev1.Pod, error) {
	return cluster.EtcdMemberPods(ctx, e.Namespace, e.Name)
}

// client returns an etcd client of the client Service, closed with t.
func (e *etcdHandle) client(t *testing.T) *clientv3.Client {
	t.Helper()
	hosts, _, err := e.hostsNow(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cluster.EtcdClient(t, e.clientTLS(t), hosts, e.serviceEndpoint())
}

// waitReady waits until the cluster has settled with n members: the
// generation observed, Available, not Progressing; n healthy voters named
// <name>-0 to <name>-n-1; the StatefulSet and its pods Ready; and etcd's own
// member list of n voters.
func (e *etcdHandle) waitReady(t *testing.T, n int) {
	t.Helper()
	var tlsConfig *tls.Config
	cluster.WaitFor(t, etcdTimeout, fmt.Sprintf("EtcdCluster %s ready with %d members", e.Name, n), func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if tlsConfig == nil {
			s := &corev1.Secret{}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name + "-client-tls"}, s); err != nil {
				return false, err
			}
			if tlsConfig, err = framework.TLSFromSecret(s); err != nil {
				return false, framework.Stop(err)
			}
		}
		st := ec.Status
		if st.ObservedGeneration != ec.Generation {
			return false, fmt.Errorf("status.observedGeneration %d, generation %d", st.ObservedGeneration, ec.Generation)
		}
		if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Errorf("not Available: %+v", c)
		}
		if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionProgressing); c == nil || c.Status != metav1.ConditionFalse {
			return false, fmt.Errorf("still Progressing: %+v", c)
		}
		if len(st.Members) != n || st.ReadyMembers != int32(n) {
			return false, fmt.Errorf("status has %d members, %d ready, want %d: %+v", len(st.Members), st.ReadyMembers, n, st.Members)
		}
		for i, m := range st.Members {
			if want := fmt.Sprintf("%s-%d", e.Name, i); m.Name != want || !m.Healthy || m.Learner {
				return false, fmt.Errorf("status member %d is %+v, want the healthy voter %s", i, m, want)
			}
		}
		sts := &appsv1.StatefulSet{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, sts); err != nil {
			return false, err
		}
		if ptr.Deref(sts.Spec.Replicas, 1) != int32(n) || sts.Status.ReadyReplicas != int32(n) {
			return false, fmt.Errorf("the StatefulSet has %d replicas, %d ready, want %d", ptr.Deref(sts.Spec.Replicas, 1), sts.Status.ReadyReplicas, n)
		}
		pods, err := e.pods(ctx)
		if err != nil {
			return false, err
		}
		if len(pods) != n {
			return false, fmt.Errorf("%d member pods, want %d", len(pods), n)
		}
		members, err := e.memberList(ctx, tlsConfig)
		if err != nil {
			return false, err
		}
		voters := 0
		for _, m := range members.Members {
			if !m.IsLearner {
				voters++
			}
		}
		if len(members.Members) != n || voters != n {
			return false, fmt.Errorf("etcd lists %d members, %d voters, want %d", len(members.Members), voters, n)
		}
		return true, nil
	})
}

func (e *etcdHandle) memberList(ctx context.Context, tlsConfig *tls.Config) (*clientv3.MemberListResponse, error) {
	hosts, _, err := e.hostsNow(ctx)
	if err != nil {
		return nil, err
	}
	cli, err := framework.NewEtcdClient(tlsConfig, hosts, e.serviceEndpoint())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	return cli.MemberList(ctx)
}

// checkAcked reads every acknowledged write back through the client
// Service and returns those that did not read back as written.
func (e *etcdHandle) checkAcked(t *testing.T, acked map[string]string) []string {
	t.Helper()
	cli := e.client(t)
	var stored map[string]string
	cluster.WaitFor(t, time.Minute, "a read of the writer's keys", func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
		var err error
		stored, err = framework.ReadPrefix(ctx, cli, writerPrefix)
		return err == nil, err
	})
	return framework.Lost(acked, stored)
}

// checkSameData checks that every member hashes the key space at one
// revision to the same value (HashKV).
func (e *etcdHandle) checkSameData(t *testing.T) {
	t.Helper()
	tlsConfig := e.clientTLS(t)
	cluster.WaitFor(t, time.Minute, "every member to hash the key space", func(ctx context.Context) (bool, error) {
		hosts, members, err := e.hostsNow(ctx)
		if err != nil {
			return false, err
		}
		cli, err := framework.NewEtcdClient(tlsConfig, hosts, e.serviceEndpoint())
		if err != nil {
			return false, err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
		rev, hash, err := framework.HashesAgree(ctx, cli, members, e.memberEndpoint)
		if err != nil {
			return false, err
		}
		t.Logf("Members %v hash the key space to %d at revision %d", members, hash, rev)
		return true, nil
	})
}

// checkVolumes returns the data volume claims of the cluster that belong
// to no member of a settled cluster of n: orphans.
func (e *etcdHandle) orphanClaims(ctx context.Context, n int) ([]string, error) {
	var list corev1.PersistentVolumeClaimList
	if err := cluster.Client.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for i := range n {
		want[fmt.Sprintf("data-%s-%d", e.Name, i)] = true
	}
	var orphans []string
	for _, c := range list.Items {
		if strings.HasPrefix(c.Name, "data-"+e.Name+"-") && !want[c.Name] && c.DeletionTimestamp == nil {
			orphans = append(orphans, c.Name)
		}
	}
	return orphans, nil
}

// startWriter starts the e2e framework's writer of keys under writerPrefix.
func startWriter(t *testing.T, cli *clientv3.Client) *framework.Writer {
	return framework.StartWriter(t, cli, writerPrefix)
}

// checkWrites stops the writer and the member watch, and checks what every
// etcd scenario promises, into r: every acknowledged write reads back, the
// members hold the same data, and no member was removed while that broke
// the quorum. It records the manager's restarts too.
func (e *etcdHandle) checkWrites(t *testing.T, r *row, w *framework.Writer, q *quorumWatch) {
	t.Helper()
	acked, failed, lastErr := w.Stop()
	r.Acked = len(acked)
	t.Logf("The writer wrote %d keys that etcd acknowledged; %d writes failed (the last with %v)", len(acked), failed, lastErr)
	if len(acked) == 0 {
		t.Fatalf("etcd acknowledged no write (%d failed, the last with %v)", failed, lastErr)
	}
	lost := e.checkAcked(t, acked)
	r.Lost = len(lost)
	e.checkSameData(t)
	removals, violations, samples := q.stop()
	r.QuorumLoss = len(violations)
	r.Restarts = restartsNow(t)
	t.Logf("The member watch took %d samples and saw %d removals", samples, removals)
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are lost, such as %v", len(lost), len(acked), lost[:min(len(lost), 10)])
	}
	if len(violations) > 0 {
		t.Errorf("members removed while that broke quorum: %v", violations)
	}
}

// patchSpec changes the cluster's spec with a merge patch.
func (e *etcdHandle) patchSpec(ctx context.Context, mutate func(*etcdv1alpha1.EtcdClusterSpec)) error {
	ec, err := e.get(ctx)
	if err != nil {
		return err
	}
	orig := ec.DeepCopy()
	mutate(&ec.Spec)
	return cluster.Client.Patch(ctx, ec, client.MergeFrom(orig))
}

// checkOrphanClaims records in r, and fails t on, volume claims of no
// member of a settled cluster of n.
func (e *etcdHandle) checkOrphanClaims(t *testing.T, r *row, n int) {
	t.Helper()
	orphans, err := e.orphanClaims(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	r.Orphans = len(orphans)
	if len(orphans) > 0 {
		t.Errorf("volumes of no member: %v", orphans)
	}
}
