//go:build e2e

package etcd

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/controller/etcdcluster"
	"github.com/tend-dev/tend/internal/etcdnames"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// B10's settings. Pass them after -args when running this package alone.
var (
	flagB10Samples = flag.Int("b10.samples", 3,
		"B10: samples per variant (at least 3 for a median); -benchtime does not change it")
	flagB10Variants = flag.String("b10.variants", "tend,anchor",
		"B10: the variants to run, comma-separated: tend (an EtcdCluster's spec.version), anchor (a StatefulSet with updateStrategy RollingUpdate)")
	flagB10Timeout = flag.Duration("b10.timeout", 10*time.Minute,
		"B10: the longest wait for one step (a cluster up, a roll, a namespace gone); a step that takes longer fails the benchmark")
	flagB10Interval = flag.Duration("b10.write-interval", 50*time.Millisecond,
		"B10: how often the writer puts a key")
	flagB10WriteTimeout = flag.Duration("b10.write-timeout", 2*time.Second,
		"B10: the timeout of each of the writer's puts")
	flagB10AnchorTLS = flag.Bool("b10.anchor-tls", true,
		"B10: the anchor's members use TLS as Tend's do (client and peer certificates); false: plain http")
	flagB10Timeline = flag.Bool("b10.timeline", true,
		"B10: log each sample's timeline: pods, raft terms and leaders, failed writes, and tend's statuses and Events")
)

// BenchmarkB10 is issue 6's B10 on the local cluster: a 3-member upgrade
// from the previous etcd minor version to the current one under a steady
// writer, Tend against the anchor design (a StatefulSet RollingUpdate):
// the roll's time, its leader elections, the longest time without an
// acknowledged write, and failed and lost writes. See doc.go.
func BenchmarkB10(b *testing.B) {
	variants, err := parseB10Variants(*flagB10Variants)
	if err != nil {
		b.Fatalf("-b10.variants: %v", err)
	}
	if *flagB10Samples < 1 {
		b.Fatal("-b10.samples must be at least 1")
	}
	start := time.Now()
	r := getRig(b)
	from, to := r.cluster.Settings.EtcdUpgradeFromVersion, r.cluster.Settings.EtcdVersion
	if from == "" || b10Minor(to) != b10Minor(from)+1 {
		b.Fatalf("B10 needs an etcd upgrade from one minor version to the next; hack/cluster/settings.sh gives %q → %q", from, to)
	}
	samples := map[string][]b10Sample{}
	measureOnce(b, from+"-to-"+to, func(b *testing.B) {
		if slices.Contains(variants, "tend") {
			r.setManagerArgs(b, r.baseArgs)
		}
		for round := range *flagB10Samples {
			for _, v := range rotation(variants, round) {
				var s b10Sample
				switch v {
				case "tend":
					s = r.b10Tend(b, from, to)
				case "anchor":
					s = r.b10Anchor(b, from, to)
				}
				s.variant = v
				samples[v] = append(samples[v], s)
			}
		}
	}, func() map[string]float64 { return b10Metrics(samples) })
	setup := b10Setup{from: from, to: to, interval: *flagB10Interval, callTimeout: *flagB10WriteTimeout,
		anchorTLS: *flagB10AnchorTLS, took: time.Since(start)}
	printTable(b, "B10, etcd upgrade under a writer on the local cluster (test/bench/etcd)", func(w io.Writer) {
		writeB10Table(w, setup, variants, samples)
	})
}

// b10Logf logs to the benchmark and, at once, to standard error: the
// testing package keeps only the last lines of a benchmark's log.
func b10Logf(b *testing.B, format string, args ...any) {
	b.Helper()
	logNow(b, "b10", format, args...)
}

// b10Roll is what a variant hands to b10Finish about its roll.
type b10Roll struct {
	variant string
	// origin is the create of the cluster, for the timeline.
	origin time.Time
	// patch: the version changed; first: the first restart; rolled:
	// every member Ready on the new version; complete: tend's
	// UpdateComplete (zero for the anchor).
	patch, first, rolled, complete time.Time
	termAfter                      uint64
	election                       time.Duration
	// obs and evs are tend's statuses and Events, for the timeline.
	obs []observation
	evs []event
}

// b10Finish ends a sample once its roll is done: a second more of
// writes, so that the writer acknowledges one after the roll's end; then
// stops the writer, reads every key back, and works out the figures.
func (r *rig) b10Finish(b *testing.B, p *b10Probe, pods *b10Pods, roll b10Roll) b10Sample {
	b.Helper()
	time.Sleep(time.Second)
	writes := p.stopWrites()
	held := p.readBack(b)
	lost, applied := b10Lost(writes, held)
	podList := pods.snapshot()
	terms := p.termSamples()
	termBefore, ok := b10TermBefore(terms, roll.first)
	if !ok {
		b.Fatal("no member reported its raft term before the first restart")
	}
	gap, gapAt := b10LongestGap(writes, roll.first, roll.rolled)
	restarts := b10Restarts(podList, roll.patch)
	s := b10Sample{
		variant:         roll.variant,
		roll:            roll.rolled.Sub(roll.first),
		elections:       int64(roll.termAfter) - int64(termBefore),
		gap:             gap,
		failed:          b10Failed(writes),
		lost:            len(lost),
		acked:           b10Acked(writes),
		electionTimeout: roll.election,
	}
	if roll.variant == "tend" {
		s.backupWait, s.complete = roll.first.Sub(roll.patch), roll.complete.Sub(roll.first)
	}
	var each []string
	for _, rs := range restarts {
		s.restarts = append(s.restarts, rs.took())
		each = append(each, fmt.Sprintf("%s %.1f s", rs.member, rs.took().Seconds()))
	}

	if *flagB10Timeline {
		marks := []mark{
			{roll.patch, "version patched"}, {roll.first, "first restart"}, {roll.rolled, "every member Ready on the new version"},
			{gapAt, fmt.Sprintf("the longest write gap begins: %d ms", gap.Milliseconds())},
			{gapAt.Add(gap), "the longest write gap ends"},
		}
		if !roll.complete.IsZero() {
			marks = append(marks, mark{roll.complete, "UpdateComplete: status.update cleared"})
		}
		marks = append(marks, b10PodMarks(podList)...)
		marks = append(marks, b10Leaders(terms)...)
		for _, f := range b10FailedSpans(writes) {
			marks = append(marks, mark{f.from, fmt.Sprintf("%d writes failed, until %+.2fs; the last: %v", f.n, f.to.Sub(roll.patch).Seconds(), f.last)})
		}
		from := roll.patch.Add(-5 * time.Second)
		marks = slices.DeleteFunc(marks, func(m mark) bool { return m.at.Before(from) })
		obs := slices.DeleteFunc(slices.Clone(roll.obs), func(o observation) bool { return o.at.Before(from) })
		evs := slices.DeleteFunc(slices.Clone(roll.evs), func(e event) bool { return e.at.Before(from) })
		// To standard error only: the testing package keeps only the last
		// lines of a benchmark's log.
		fmt.Fprintf(os.Stderr, "b10: B10 %s timeline (seconds after the version's patch):\n%s", roll.variant, renderTimeline(roll.patch, obs, evs, marks))
	}
	tendOnly := ""
	if roll.variant == "tend" {
		tendOnly = fmt.Sprintf("; backup wait %.1f s; UpdateComplete %.1f s after the first restart", s.backupWait.Seconds(), s.complete.Seconds())
	}
	b10Logf(b, "B10 %s: created → patched %.1f s%s; roll %.1f s (restarts: %s); raft term %d → %d; longest write gap %d ms; "+
		"writes: %d acknowledged, %d failed (%d of them applied all the same), %d lost%s; election timeout %s",
		roll.variant, roll.patch.Sub(roll.origin).Seconds(), tendOnly, s.roll.Seconds(), strings.Join(each, ", "),
		termBefore, roll.termAfter, gap.Milliseconds(), s.acked, s.failed, applied, s.lost, b10FirstFew(lost), roll.election)
	if gap > 2*roll.election {
		r.b10GapLogs(b, p.ns, gapAt, gapAt.Add(gap))
	}
	if len(lost) > 0 {
		b.Errorf("B10 %s: %d acknowledged writes are missing at the end: %s", roll.variant, len(lost), b10FirstFew(lost))
	}
	return s
}

// b10GapLogs logs what the members that run now logged about raft during
// a long write gap, from..to: their elections, votes and peers. The pods
// that went are gone, and their logs with them.
func (r *rig) b10GapLogs(b *testing.B, ns string, from, to time.Time) {
	b.Helper()
	for i := range b10Members {
		name := b10MemberName(i)
		since := metav1.NewTime(from.Add(-2 * time.Second))
		data, err := r.cluster.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "etcd", Timestamps: true, SinceTime: &since}).DoRaw(b.Context())
		if err != nil {
			fmt.Fprintf(os.Stderr, "b10: the log of %s: %v\n", name, err)
			continue
		}
		lines := b10RaftLines(string(data), from, to.Add(2*time.Second))
		if len(lines) > 40 {
			lines = append(lines[:20], append([]string{"…"}, lines[len(lines)-20:]...)...)
		}
		fmt.Fprintf(os.Stderr, "b10: %s's raft and peer lines around the longest write gap (seconds after its start):\n%s\n", name, strings.Join(lines, "\n"))
	}
}

// b10FirstFew names the first few keys of keys, for a log line.
func b10FirstFew(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	if len(keys) > 5 {
		return fmt.Sprintf(" (%s, …)", strings.Join(keys[:5], ", "))
	}
	return fmt.Sprintf(" (%s)", strings.Join(keys, ", "))
}

// b10ElectionTimeout reads the members' election timeout from their
// StatefulSet.
func (r *rig) b10ElectionTimeout(b *testing.B, ns string) time.Duration {
	b.Helper()
	sts := &appsv1.StatefulSet{}
	if err := r.cluster.Client.Get(b.Context(), client.ObjectKey{Namespace: ns, Name: b10Cluster}, sts); err != nil {
		b.Fatalf("reading the StatefulSet %s: %v", b10Cluster, err)
	}
	return electionTimeout(sts)
}

// b10Anchor takes one sample of the anchor: a StatefulSet of 3 members on
// from, its template then moved to to, which the StatefulSet controller
// rolls.
func (r *rig) b10Anchor(b *testing.B, from, to string) b10Sample {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	c := r.cluster.Client
	timeout := *flagB10Timeout
	useTLS := *flagB10AnchorTLS
	fromImage, toImage := r.cluster.Settings.EtcdUpgradeFromImage, r.cluster.Settings.EtcdImage
	ns := r.cluster.Namespace(b)

	var tlsConfig *tls.Config
	if useTLS {
		secrets, err := b10AnchorTLSSecrets(ns, time.Now())
		if err != nil {
			b.Fatalf("issuing the anchor's certificates: %v", err)
		}
		for _, s := range secrets {
			if err := c.Create(ctx, s); err != nil {
				b.Fatalf("creating the Secret %s: %v", s.Name, err)
			}
			if s.Name == b10AnchorClientSecret {
				if tlsConfig, err = framework.TLSFromSecret(s); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	pods := r.b10WatchPods(ctx, b, ns, b10AnchorLabels())
	pods.setTarget(fromImage)
	origin := time.Now()
	if err := c.Create(ctx, b10AnchorPeerServiceObject(ns)); err != nil {
		b.Fatalf("creating the anchor's Service: %v", err)
	}
	if err := c.Create(ctx, b10AnchorStatefulSet(ns, fromImage, from, useTLS)); err != nil {
		b.Fatalf("creating the anchor's StatefulSet: %v", err)
	}
	r.b10WaitPods(b, ns, pods, fromImage, timeout)
	p := r.b10StartProbe(b, ns, pods, tlsConfig)
	defer p.close()
	p.waitHealthy(b, from, timeout)
	election := r.b10ElectionTimeout(b, ns)
	b10Logf(b, "B10 anchor: %d members of %s in %s, Ready and healthy after %.1f s", b10Members, from, ns, time.Since(origin).Seconds())

	p.startWriter(b)
	p.waitHealthy(b, from, timeout)
	pods.setTarget(toImage)
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: b10Cluster}, sts); err != nil {
		b.Fatalf("reading the anchor's StatefulSet: %v", err)
	}
	sts.Spec.Template = b10AnchorStatefulSet(ns, toImage, to, useTLS).Spec.Template
	patch := time.Now()
	if err := c.Update(ctx, sts); err != nil {
		b.Fatalf("moving the anchor's StatefulSet to %s: %v", to, err)
	}
	rolled := r.b10WaitPods(b, ns, pods, toImage, timeout)
	termAfter := p.waitHealthy(b, to, timeout)
	first, ok := b10FirstGoing(pods.snapshot(), patch)
	if !ok {
		b.Fatal("every member runs the new version, but no pod was seen going")
	}
	s := r.b10Finish(b, p, pods, b10Roll{variant: "anchor", origin: origin, patch: patch, first: first, rolled: rolled,
		termAfter: termAfter, election: election})
	p.close()
	cancel()
	r.deleteNamespace(b, ns)
	return s
}

// b10Tend takes one sample of Tend: an EtcdCluster of 3 members on from,
// its spec.version then patched to to, which Tend rolls after its
// verified pre-upgrade backup.
func (r *rig) b10Tend(b *testing.B, from, to string) b10Sample {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	c := r.cluster.Client
	timeout := *flagB10Timeout
	ns := r.cluster.Namespace(b)
	o := r.observe(ctx, ns, b10Cluster)
	o.waitReady(b)
	ec := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b10Cluster},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](b10Members),
			Version:        from,
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
		},
	}
	target := ec.DeepCopy()
	target.Spec.Version = to
	fromImage, toImage := etcdnames.Image(ec), etcdnames.Image(target)
	pods := r.b10WatchPods(ctx, b, ns, map[string]string{etcdcluster.LabelCluster: b10Cluster})
	pods.setTarget(fromImage)

	origin := time.Now()
	if err := c.Create(ctx, ec); err != nil {
		b.Fatalf("creating the EtcdCluster: %v", err)
	}
	o.waitFor(b, "a first status (is the EtcdCluster controller in the deployed manager? kubectl -n tend-system logs deployment/tend-manager)",
		origin, origin, min(firstStatusTimeout, timeout), func(o *observation) bool { return len(o.status.Conditions) > 0 }, nil)
	o.waitFor(b, fmt.Sprintf("%d healthy voters on %s, settled", b10Members, from), origin, origin, timeout, func(o *observation) bool {
		return stable(o, b10Members, ec.Generation) && o.status.CurrentVersion == from
	}, nil)
	r.b10WaitPods(b, ns, pods, fromImage, timeout)
	tlsConfig := r.cluster.SecretTLS(b, ns, etcdnames.ClientTLSSecret(ec))
	p := r.b10StartProbe(b, ns, pods, tlsConfig)
	defer p.close()
	p.waitHealthy(b, from, timeout)
	election := r.b10ElectionTimeout(b, ns)
	b10Logf(b, "B10 tend: %d members of %s in %s, settled and healthy after %.1f s", b10Members, from, ns, time.Since(origin).Seconds())

	p.startWriter(b)
	p.waitHealthy(b, from, timeout)
	pods.setTarget(toImage)
	patch := time.Now()
	if err := c.Patch(ctx, ec, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"version":%q}}`, to))); err != nil {
		b.Fatalf("patching spec.version to %s: %v", to, err)
	}
	gen := ec.Generation
	complete := o.waitFor(b, fmt.Sprintf("the upgrade to %s complete: status.update cleared, currentVersion %s", to, to), origin, patch, timeout,
		func(o *observation) bool {
			st := &o.status
			return o.generation >= gen && st.ObservedGeneration >= gen && st.Update == nil && st.CurrentVersion == to && converged(st, b10Members)
		}, b10RollFailed)
	rolled := r.b10WaitPods(b, ns, pods, toImage, timeout)
	termAfter := p.waitHealthy(b, to, timeout)
	obs, evs := o.snapshot()
	first, ok := b10FirstGoing(pods.snapshot(), patch)
	for _, e := range evs {
		if e.reason == "MemberRestarted" && !e.at.Before(patch) && (!ok || e.at.Before(first)) {
			first, ok = e.at, true
		}
	}
	if !ok {
		b.Fatal("the upgrade is complete, but no pod was seen going and no MemberRestarted Event came")
	}
	s := r.b10Finish(b, p, pods, b10Roll{variant: "tend", origin: origin, patch: patch, first: first, rolled: rolled, complete: complete,
		termAfter: termAfter, election: election, obs: obs, evs: evs})
	p.close()
	cancel()
	r.deleteNamespace(b, ns)
	return s
}

// b10RollFailed stops the wait for the upgrade when the last status says
// that it cannot go on: blocked, stalled, or its check failed.
func b10RollFailed(obs []observation) error {
	if len(obs) == 0 {
		return nil
	}
	c := meta.FindStatusCondition(obs[len(obs)-1].status.Conditions, etcdv1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	switch c.Reason {
	case etcdv1alpha1.ReasonUpgradeBlocked, etcdv1alpha1.ReasonUpdateStalled, etcdv1alpha1.ReasonUpdateCheckFailed:
		return fmt.Errorf("Degraded=%s/%s: %s", c.Status, c.Reason, c.Message)
	}
	return nil
}
