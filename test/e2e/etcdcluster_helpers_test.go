//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// The test spells out the names and labels that the EtcdCluster contract
// promises users rather than importing the controller's, so that a change
// to them shows up here as a broken promise.
const (
	// etcdClusterLabel is on every object of a cluster.
	etcdClusterLabel = "etcd.tend.dev/cluster"
	// etcdCallTimeout bounds one call to etcd from this machine.
	etcdCallTimeout = 10 * time.Second
	// writerPrefix holds the writer's keys.
	writerPrefix = "writer/"
)

// etcdTest is the EtcdCluster that TestEtcdCluster works on, as created.
type etcdTest struct {
	*etcdv1alpha1.EtcdCluster
}

func (e *etcdTest) get(ctx context.Context) (*etcdv1alpha1.EtcdCluster, error) {
	ec := &etcdv1alpha1.EtcdCluster{}
	return ec, cluster.Client.Get(ctx, client.ObjectKeyFromObject(e.EtcdCluster), ec)
}

// patchSpec changes the cluster's spec with a merge patch.
func (e *etcdTest) patchSpec(t *testing.T, mutate func(*etcdv1alpha1.EtcdClusterSpec)) {
	t.Helper()
	ec, err := e.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	orig := ec.DeepCopy()
	mutate(&ec.Spec)
	if err := cluster.Client.Patch(t.Context(), ec, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patching the spec of EtcdCluster %s: %v", e.Name, err)
	}
}

// annotate sets an annotation on the EtcdCluster, by a merge patch.
func (e *etcdTest) annotate(t *testing.T, key, value string) {
	t.Helper()
	ec, err := e.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	orig := ec.DeepCopy()
	if ec.Annotations == nil {
		ec.Annotations = map[string]string{}
	}
	ec.Annotations[key] = value
	if err := cluster.Client.Patch(t.Context(), ec, client.MergeFrom(orig)); err != nil {
		t.Fatalf("annotating EtcdCluster %s: %v", e.Name, err)
	}
}

// serviceEndpoint is the client Service's URL, status.clientEndpoint.
func (e *etcdTest) serviceEndpoint() string {
	return framework.EtcdServiceEndpoint(e.Namespace, e.Name)
}

// memberHost is member's own DNS name, through the peer Service.
func (e *etcdTest) memberHost(member string) string {
	return framework.EtcdMemberHost(e.Namespace, e.Name, member)
}

func (e *etcdTest) memberEndpoint(member string) string {
	return "https://" + e.memberHost(member) + ":2379"
}

// clientTLS is the client certificate that applications mount.
func (e *etcdTest) clientTLS(t *testing.T) *tls.Config {
	t.Helper()
	return cluster.SecretTLS(t, e.Namespace, e.Name+"-client-tls")
}

// hostsNow maps the cluster's DNS names to the addresses this machine
// reaches, and returns the members with an IP (framework.EtcdHosts).
func (e *etcdTest) hostsNow(ctx context.Context) (map[string]string, []string, error) {
	return cluster.EtcdHosts(ctx, e.Namespace, e.Name)
}

func (e *etcdTest) hosts(t *testing.T) map[string]string {
	t.Helper()
	hosts, _, err := e.hostsNow(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return hosts
}

// pods lists the member pods, sorted (framework.EtcdMemberPods).
func (e *etcdTest) pods(ctx context.Context) ([]corev1.Pod, error) {
	return cluster.EtcdMemberPods(ctx, e.Namespace, e.Name)
}

// waitReady waits until the cluster has settled with n members, and returns
// it: the spec's generation observed, Available, not Progressing, not
// Degraded; members <name>-0 to <name>-n-1, all healthy voters, one of them
// the leader, and etcd's own member list agreeing with status; the
// StatefulSet, its pods and the disruption budget sized for n. It fails at
// once if status ever shows two learners: members are added one at a time.
func (e *etcdTest) waitReady(t *testing.T, n int) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var tlsConfig *tls.Config
	var ec *etcdv1alpha1.EtcdCluster
	cluster.WaitFor(t, framework.DefaultTimeout, fmt.Sprintf("EtcdCluster %s ready with %d members", e.Name, n), func(ctx context.Context) (bool, error) {
		var err error
		if ec, err = e.get(ctx); err != nil {
			return false, err
		}
		if tlsConfig == nil {
			// The client certificate is among the first objects made,
			// but a new cluster may not have it yet.
			secret := &corev1.Secret{}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name + "-client-tls"}, secret); err != nil {
				return false, err
			}
			if tlsConfig, err = framework.TLSFromSecret(secret); err != nil {
				return false, framework.Stop(err)
			}
		}
		if err := checkStatus(ec, n); err != nil {
			return false, err
		}
		if err := e.checkWorkload(ctx, n); err != nil {
			return false, err
		}
		return true, e.checkEtcdMembers(ctx, tlsConfig, ec)
	})
	return ec
}

// checkStatus says how ec's status falls short of a settled cluster of n
// members, or nil.
func checkStatus(ec *etcdv1alpha1.EtcdCluster, n int) error {
	st := ec.Status
	learners := 0
	for _, m := range st.Members {
		if m.Learner {
			learners++
		}
	}
	if learners > 1 {
		return framework.Stop(fmt.Errorf("status shows %d learners at once, want one at a time: %+v", learners, st.Members))
	}
	if st.ObservedGeneration != ec.Generation {
		return fmt.Errorf("status.observedGeneration is %d, the spec's generation %d", st.ObservedGeneration, ec.Generation)
	}
	for _, c := range []struct{ typ, status, reason string }{
		{etcdv1alpha1.ConditionAvailable, string(metav1.ConditionTrue), etcdv1alpha1.ReasonQuorumHealthy},
		{etcdv1alpha1.ConditionProgressing, string(metav1.ConditionFalse), etcdv1alpha1.ReasonStable},
		{etcdv1alpha1.ConditionDegraded, string(metav1.ConditionFalse), etcdv1alpha1.ReasonAsExpected},
	} {
		if ok, err := hasCondition(ec, c.typ, metav1.ConditionStatus(c.status), c.reason); !ok {
			return err
		}
	}
	if st.Replicas != int32(n) || st.ReadyMembers != int32(n) || len(st.Members) != n {
		return fmt.Errorf("status has replicas %d, readyMembers %d and %d members, want %d: %+v", st.Replicas, st.ReadyMembers, len(st.Members), n, st.Members)
	}
	leaders := 0
	for i, m := range st.Members {
		if want := fmt.Sprintf("%s-%d", ec.Name, i); m.Name != want {
			return fmt.Errorf("status member %d is %s, want %s: %+v", i, m.Name, want, st.Members)
		}
		if !m.Healthy || m.Learner || m.UnhealthySince != nil {
			return fmt.Errorf("member %s is not a healthy voter: %+v", m.Name, m)
		}
		if _, err := strconv.ParseUint(m.ID, 16, 64); err != nil {
			return fmt.Errorf("member %s has ID %q, want a hexadecimal member ID", m.Name, m.ID)
		}
		if m.Leader {
			leaders++
			if st.Leader != m.Name {
				return fmt.Errorf("member %s is the leader but status.leader is %q", m.Name, st.Leader)
			}
		}
	}
	if leaders != 1 {
		return fmt.Errorf("status shows %d leaders, want 1: %+v", leaders, st.Members)
	}
	return nil
}

// checkWorkload says how the StatefulSet, pods and budget fall short of n
// members, or nil.
func (e *etcdTest) checkWorkload(ctx context.Context, n int) error {
	sts := &appsv1.StatefulSet{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, sts); err != nil {
		return err
	}
	if ptr.Deref(sts.Spec.Replicas, 1) != int32(n) || sts.Status.ReadyReplicas != int32(n) {
		return fmt.Errorf("the StatefulSet has %d replicas, %d ready, want %d", ptr.Deref(sts.Spec.Replicas, 1), sts.Status.ReadyReplicas, n)
	}
	pods, err := e.pods(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is still terminating", p.Name)
		}
	}
	if len(pods) != n || (n > 0 && names[n-1] != fmt.Sprintf("%s-%d", e.Name, n-1)) {
		return fmt.Errorf("the member pods are %v, want %s-0 to %s-%d", names, e.Name, e.Name, n-1)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, pdb); err != nil {
		return err
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != n/2+1 {
		return fmt.Errorf("the PodDisruptionBudget has minAvailable %v, want %d, the quorum of %d", pdb.Spec.MinAvailable, n/2+1, n)
	}
	return nil
}

// checkEtcdMembers asks etcd itself, through the client Service, for its
// members, and says how they differ from ec's status, or nil.
func (e *etcdTest) checkEtcdMembers(ctx context.Context, tlsConfig *tls.Config, ec *etcdv1alpha1.EtcdCluster) error {
	hosts, _, err := e.hostsNow(ctx)
	if err != nil {
		return err
	}
	cli, err := framework.NewEtcdClient(tlsConfig, hosts, e.serviceEndpoint())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd's member list: %w", err)
	}
	inEtcd := map[string]string{}
	for _, m := range resp.Members {
		if m.IsLearner {
			return fmt.Errorf("etcd still has learner %s (%x)", m.Name, m.ID)
		}
		inEtcd[m.Name] = fmt.Sprintf("%x", m.ID)
	}
	inStatus := map[string]string{}
	for _, m := range ec.Status.Members {
		id, _ := strconv.ParseUint(m.ID, 16, 64)
		inStatus[m.Name] = fmt.Sprintf("%x", id)
	}
	if fmt.Sprint(inEtcd) != fmt.Sprint(inStatus) {
		return fmt.Errorf("etcd's members (name: ID) are %v, status says %v", inEtcd, inStatus)
	}
	return nil
}

// hasCondition tells whether ec has condition typ with status and reason,
// and otherwise says what it has.
func hasCondition(ec *etcdv1alpha1.EtcdCluster, typ string, status metav1.ConditionStatus, reason string) (bool, error) {
	c := meta.FindStatusCondition(ec.Status.Conditions, typ)
	switch {
	case c == nil:
		return false, fmt.Errorf("status has no %s condition, want %s/%s", typ, status, reason)
	case c.Status != status || c.Reason != reason:
		return false, fmt.Errorf("%s is %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return true, nil
}

// memberID returns the ID that ec's status gives member.
func memberID(t *testing.T, ec *etcdv1alpha1.EtcdCluster, member string) uint64 {
	t.Helper()
	for _, m := range ec.Status.Members {
		if m.Name == member {
			id, err := strconv.ParseUint(m.ID, 16, 64)
			if err != nil {
				t.Fatalf("member %s has ID %q: %v", member, m.ID, err)
			}
			return id
		}
	}
	t.Fatalf("status has no member %s: %+v", member, ec.Status.Members)
	return 0
}

// podAndClaim returns member's pod and its data volume's claim.
func (e *etcdTest) podAndClaim(t *testing.T, member string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
	t.Helper()
	pod, pvc := &corev1.Pod{}, &corev1.PersistentVolumeClaim{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: member}, pod); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: "data-" + member}, pvc); err != nil {
		t.Fatal(err)
	}
	return pod, pvc
}

// waitPodReplaced waits until a new pod of old's name, not old itself, is
// Ready.
func (e *etcdTest) waitPodReplaced(t *testing.T, old *corev1.Pod) {
	t.Helper()
	cluster.WaitFor(t, framework.DefaultTimeout, "a new Ready pod "+old.Name, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(old), pod); err != nil {
			return false, err
		}
		if pod.UID == old.UID {
			return false, fmt.Errorf("the old pod is still there")
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("the new pod is %s, not Ready", pod.Status.Phase)
	})
}

// put writes a new random value under key through the client Service, and
// returns it.
func (e *etcdTest) put(t *testing.T, key string) string {
	t.Helper()
	value := fmt.Sprintf("value-%d", rand.Int64())
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer cancel()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatalf("writing %s: %v", key, err)
	}
	return value
}

// waitMemberHolds waits until member itself, read without consulting the
// others (a serializable read), holds value under key.
func (e *etcdTest) waitMemberHolds(t *testing.T, member, key, value string) {
	t.Helper()
	tlsConfig := e.clientTLS(t)
	cluster.WaitFor(t, time.Minute, fmt.Sprintf("member %s to hold %s", member, key), func(ctx context.Context) (bool, error) {
		hosts, _, err := e.hostsNow(ctx)
		if err != nil {
			return false, err
		}
		cli, err := framework.NewEtcdClient(tlsConfig, hosts, e.memberEndpoint(member))
		if err != nil {
			return false, err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
		resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
		if err != nil {
			return false, err
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
			return false, fmt.Errorf("it holds %v, want %q", resp.Kvs, value)
		}
		return true, nil
	})
}

// checkSameData checks that every member holds the same keys and values:
// the hash of the key space at one revision (HashKV) is equal on all of
// them. A member that has not reached the revision yet is waited for.
func (e *etcdTest) checkSameData(t *testing.T) {
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

// waitEvents waits until the cluster has Events with each of reasons.
func (e *etcdTest) waitEvents(t *testing.T, reasons ...string) {
	t.Helper()
	cluster.WaitFor(t, time.Minute, fmt.Sprintf("Events %v on EtcdCluster %s", reasons, e.Name), func(ctx context.Context) (bool, error) {
		var list corev1.EventList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind == "EtcdCluster" && ev.InvolvedObject.Name == e.Name {
				seen[ev.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, fmt.Errorf("no %s Event; the cluster's Events have reasons %v", r, slices.Sorted(maps.Keys(seen)))
			}
		}
		return true, nil
	})
}

// startWriter starts a writer of keys under writerPrefix on cli.
func startWriter(t *testing.T, cli *clientv3.Client) *framework.Writer {
	return framework.StartWriter(t, cli, writerPrefix)
}
