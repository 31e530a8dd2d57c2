//go:build e2e

package etcd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// The measured cluster: its name, its size before and after the scale-out,
// and the member whose volume and pod are deleted.
const (
	clusterName   = "b8"
	fromMembers   = 3
	toMembers     = 5
	victimOrdinal = 1
)

// firstStatusTimeout bounds the wait for a controller's first status
// write: none by then means that no EtcdCluster controller runs.
const firstStatusTimeout = 2 * time.Minute

// BenchmarkB8 is issue 6's B8 on the local cluster: seconds from create to
// Available for 3 members, to scale 3 → 5, and to replace a failed member,
// for Tend's manager as deployed ("tend") and for the same manager made the
// anchor design, one look at the membership per 10 s ("anchor"), in one run,
// each against etcd's election timeout as the floor. See doc.go.
func BenchmarkB8(b *testing.B) {
	r := getRig(b)
	tend := &variant{name: "tend"}
	anchor := &variant{name: "anchor", interval: *flagAnchorInterval}
	figs := figures(fromMembers, toMembers)
	for _, v := range []*variant{tend, anchor} {
		b.Run(v.name, func(b *testing.B) {
			if v.interval != "" {
				// Registered first, so that a manager that fails to start
				// with the interval is set back too.
				b.Cleanup(func() { r.setManagerArgs(b, r.baseArgs) })
			}
			r.setManagerArgs(b, withInterval(r.baseArgs, v.interval))
			for b.Loop() {
				v.samples = append(v.samples, r.measure(b))
			}
			for _, f := range figs {
				b.ReportMetric(statsOf(v.samples, f.of).mean, f.unit)
			}
		})
	}
	var sb strings.Builder
	writeTable(&sb, figs, tend, anchor)
	b.Log("\n" + sb.String())
	fmt.Fprintf(os.Stdout, "\nB8, EtcdCluster on the local cluster (test/bench/etcd):\n%s", sb.String())
}

// newCluster is the measured EtcdCluster: 3 members on volumes of the
// default StorageClass, replaced after -b8.unhealthy-for, everything else
// the CRD's defaults.
func newCluster(ns string) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](fromMembers),
			Storage:  etcdv1alpha1.Storage{Ephemeral: false},
			MemberReplacement: etcdv1alpha1.MemberReplacement{
				Policy:       etcdv1alpha1.ReplacementAuto,
				UnhealthyFor: &metav1.Duration{Duration: *flagUnhealthyFor},
			},
		},
	}
}

func memberName(i int) string { return fmt.Sprintf("%s-%d", clusterName, i) }

// measure takes one sample in a namespace of its own: create, scale out,
// replace a member; then deletes the namespace and waits until it is gone.
// Each step starts once the previous one has settled: every member a
// healthy voter and Progressing=False for the current generation.
func (r *rig) measure(b *testing.B) sample {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	c := r.cluster.Client
	ns := r.cluster.Namespace(b)
	o := r.observe(ctx, ns, clusterName)
	o.waitReady(b)
	timeout := *flagTimeout
	var s sample
	var marks []mark
	markNow := func(what string) time.Time {
		now := time.Now()
		marks = append(marks, mark{now, what})
		return now
	}

	// Create.
	ec := newCluster(ns)
	t0 := markNow(fmt.Sprintf("create %d members", fromMembers))
	if err := c.Create(ctx, ec); err != nil {
		b.Fatalf("creating the EtcdCluster: %v", err)
	}
	o.waitFor(b, "a first status (is the EtcdCluster controller in the deployed manager? kubectl -n tend-system logs deployment/tend-manager)",
		t0, t0, min(firstStatusTimeout, timeout), func(o *observation) bool { return len(o.status.Conditions) > 0 }, nil)
	tAvailable := o.waitFor(b, "Available=True", t0, t0, timeout, func(o *observation) bool { return available(&o.status) }, nil)
	tAll := o.waitFor(b, fmt.Sprintf("%d healthy voters", fromMembers), t0, t0, timeout,
		func(o *observation) bool { return converged(&o.status, fromMembers) }, nil)
	s.create, s.createAll = tAvailable.Sub(t0), tAll.Sub(t0)
	marks = append(marks, mark{tAvailable, "Available"}, mark{tAll, fmt.Sprintf("%d healthy voters", fromMembers)})
	tSettled := o.waitFor(b, "the new cluster to settle (Progressing=False)", t0, t0, timeout,
		func(o *observation) bool { return stable(o, fromMembers, ec.Generation) }, nil)
	s.floor = r.electionTimeout(b, ns)

	// Scale out.
	t1 := markNow(fmt.Sprintf("scale %d → %d", fromMembers, toMembers))
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, toMembers)
	if err := c.Patch(ctx, ec, client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatalf("scaling the EtcdCluster: %v", err)
	}
	tScaled := o.waitFor(b, fmt.Sprintf("%d healthy voters, no learner", toMembers), t0, t1, timeout,
		func(o *observation) bool { return converged(&o.status, toMembers) }, nil)
	s.scale = tScaled.Sub(t1)
	marks = append(marks, mark{tScaled, fmt.Sprintf("%d healthy voters", toMembers)})
	o.waitFor(b, "the scaled cluster to settle (Progressing=False)", t0, t1, timeout,
		func(o *observation) bool { return stable(o, toMembers, ec.Generation) }, nil)

	// Replace: the member loses its volume, then its pod.
	victim := memberName(victimOrdinal)
	last, _ := o.last()
	m := findMember(&last.status, victim)
	if m == nil || m.ID == "" {
		b.Fatalf("status lists no member %s with an ID: %s", victim, summary(&last))
	}
	oldID := m.ID
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + victim}}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		b.Fatalf("reading the volume claim of %s: %v", victim, err)
	}
	t2 := markNow(fmt.Sprintf("delete the volume claim and pod of %s (member %s)", victim, oldID))
	if err := c.Delete(ctx, pvc); err != nil {
		b.Fatalf("deleting %s: %v", pvc.Name, err)
	}
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim}}); err != nil {
		b.Fatalf("deleting the pod %s: %v", victim, err)
	}
	tReplaced := o.waitFor(b, fmt.Sprintf("%s back with a new ID and %d healthy voters", victim, toMembers), t0, t2, timeout,
		func(o *observation) bool { return replaced(&o.status, victim, oldID, toMembers) },
		func(obs []observation) error {
			return cameBackUnreplaced(obs, t2, time.Now(), victim, oldID, *flagUnhealthyFor)
		})
	obs, evs := o.snapshot()
	rt := replaceTimeline(obs, evs, t2, tReplaced, victim, oldID)
	s.replace = tReplaced.Sub(t2)
	s.replaceNotice, s.replaceThreshold, s.replaceRest = rt.unhealthy.Sub(t2), rt.acted.Sub(rt.unhealthy), tReplaced.Sub(rt.acted)
	marks = append(marks, mark{rt.unhealthy, victim + " seen unhealthy"}, mark{rt.acted, "Tend acted on " + victim},
		mark{tReplaced, victim + " replaced"})

	o.logTimeline(b, t0, marks)
	var steps strings.Builder
	for _, st := range scaleSteps(obs, t1, tScaled, []string{memberName(fromMembers), memberName(toMembers - 1)}) {
		fmt.Fprintf(&steps, "; %s listed %.1f s, voter %.1f s, healthy voter %.1f s", st.name, st.listed.Seconds(), st.voter.Seconds(), st.healthy.Seconds())
	}
	since := "none reported"
	if !rt.unhealthySince.IsZero() {
		since = fmt.Sprintf("%.0f s after the delete (second resolution)", rt.unhealthySince.Sub(t2.Truncate(time.Second)).Seconds())
	}
	b.Logf("sample: create → Available %.1f s, → %d healthy voters %.1f s (settled %.1f s); scale %.1f s%s; "+
		"replace %.1f s = notice %.1f + threshold %.1f + rest %.1f (Tend's unhealthySince: %s); election timeout %s",
		s.create.Seconds(), fromMembers, s.createAll.Seconds(), tSettled.Sub(t0).Seconds(), s.scale.Seconds(), steps.String(),
		s.replace.Seconds(), s.replaceNotice.Seconds(), s.replaceThreshold.Seconds(), s.replaceRest.Seconds(), since, s.floor)

	cancel()
	r.deleteNamespace(b, ns)
	return s
}

// electionTimeout reads the members' election timeout from the
// StatefulSet that runs them.
func (r *rig) electionTimeout(b *testing.B, ns string) time.Duration {
	b.Helper()
	sts := &appsv1.StatefulSet{}
	if err := r.cluster.Client.Get(b.Context(), client.ObjectKey{Namespace: ns, Name: clusterName}, sts); err != nil {
		b.Fatalf("reading the StatefulSet %s: %v", clusterName, err)
	}
	return electionTimeout(sts)
}
