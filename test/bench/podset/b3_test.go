package podset

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkB3 churns pod statuses while the sets are at size, under each
// controller with 5 workers and no client limit, and reports the most live
// pods that any set ever had above its desired count, as the harness's pod
// watch saw them. The churn flips pods' Ready condition back and forth and
// fails one pod in ten (phase Failed), which the controller must replace:
// the replacement's create is what a stale cache could double.
func BenchmarkB3(b *testing.B) {
	for _, k := range []kind{podSets, replicaSets} {
		b.Run(k.String(), func(b *testing.B) {
			r := getRig(b)
			var res churn
			for range b.N {
				res = r.runChurn(b, k, shape{*flagB3Sets, *flagB3Pods}, unlimitedBudget)
			}
			b.ReportMetric(float64(res.maxOver), "max-pods-above-desired")
			b.ReportMetric(res.opsPerSecond(), "status-writes/s")
			recordB3(k, res)
			b.Logf("%s: %+v", k, res)
		})
	}
	record(b, b3Rows()...)
}

// b3Rows compares the sides that ran; a side not run prints as "–".
func b3Rows() []row {
	cell := func(k kind, f func(churn) string) string {
		res, ok := b3Results[k]
		if !ok {
			return ""
		}
		return f(res)
	}
	both := func(measure string, f func(churn) string) row {
		return row{bench: "B3", measure: measure, podset: cell(podSets, f), replicaset: cell(replicaSets, f), conditions: b3Conditions()}
	}
	peak := both("peak live pods above desired", func(c churn) string { return fmt.Sprint(c.maxOver) })
	peak.goal = "0"
	if res, ok := b3Results[podSets]; ok {
		peak.met = yes(res.maxOver == 0)
	}
	perReplacement := both("controller writes per failed pod", func(c churn) string { return fmt.Sprintf("%.2f", c.writesPerReplacement()) })
	ps, okP := b3Results[podSets]
	rs, okR := b3Results[replicaSets]
	if okP && okR {
		perReplacement.ratio = ratio(ps.writesPerReplacement(), rs.writesPerReplacement())
	}
	return []row{
		peak,
		both("sets that ever went above desired", func(c churn) string { return fmt.Sprint(c.overSets) }),
		both("churn: status writes (of which pods failed), per s", func(c churn) string {
			return fmt.Sprintf("%d (%d), %.0f/s", c.flips+c.fails, c.fails, c.opsPerSecond())
		}),
		perReplacement,
		both("controller writes: pods / status / events / other (409s)", func(c churn) string { return breakdown(c.writes) }),
	}
}

var b3Results = map[kind]churn{}

func recordB3(k kind, res churn) { b3Results[k] = res }

func b3Conditions() string {
	return fmt.Sprintf("%d sets × %d, %s of churn at %g status writes/s, %s", *flagB3Sets, *flagB3Pods, *flagB3Churn, *flagB3Rate, unlimitedBudget)
}

// churn is what one controller did under status churn.
type churn struct {
	// flips and fails are the status writes the churn made: Ready flipped,
	// and pods failed.
	flips, fails int64
	elapsed      time.Duration
	// maxOver and overSets are the harness watch's overshoot: the most live
	// pods above desired in any set, and how many sets were ever above.
	maxOver, overSets int
	writes            ControllerWrites
}

func (c churn) opsPerSecond() float64 { return float64(c.flips+c.fails) / c.elapsed.Seconds() }

func (c churn) writesPerReplacement() float64 {
	if c.fails == 0 {
		return 0
	}
	return c.writes.Total() / float64(c.fails)
}

// runChurn brings sh's sets to size under k's controller, churns pod
// statuses for flagB3Churn, waits until every set is back at size and Ready,
// and reports the overshoot over the whole phase, scale-up included.
func (r *rig) runChurn(b *testing.B, k kind, sh shape, bud budget) churn {
	b.Helper()
	ctx := context.Background()
	c := r.startController(b, k, bud)
	ns := r.namespace(b, "b3-"+strings.ToLower(k.String()))
	t := track(b, r.cs, ns)
	sets, desired := r.sets(k, ns, sh)
	t.expect(desired)
	if err := r.createAll(ctx, sets); err != nil {
		b.Fatal(err)
	}
	if _, _, err := t.waitReady(ctx, sh.total(), 10*time.Minute, c.err); err != nil {
		b.Fatalf("%s: %v", k, err)
	}
	if err := r.waitStatus(ctx, c, ns, sh.sets, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	before, err := r.quiesce(ctx, k)
	if err != nil {
		b.Fatal(err)
	}

	var res churn
	// Both controllers get the same churn: a fixed rate over all writers.
	limiter := rate.NewLimiter(rate.Limit(*flagB3Rate), 1)
	start := time.Now()
	churnCtx, stop := context.WithTimeout(ctx, *flagB3Churn)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var churnErr error
	for i := range *flagB3Churners {
		rng := rand.New(rand.NewPCG(uint64(i), 3))
		wg.Go(func() {
			for limiter.Wait(churnCtx) == nil {
				name, ready, ok := t.randomRunning(rng)
				if !ok {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				fail := rng.IntN(10) == 0
				err := r.patchStatus(churnCtx, ns, name, !ready, fail)
				switch {
				case err == nil && fail:
					atomic.AddInt64(&res.fails, 1)
				case err == nil:
					atomic.AddInt64(&res.flips, 1)
				case apierrors.IsNotFound(err), churnCtx.Err() != nil:
				default:
					errOnce.Do(func() { churnErr = err })
					stop()
				}
			}
		})
	}
	wg.Wait()
	stop()
	res.elapsed = time.Since(start)
	if churnErr != nil {
		b.Fatalf("churning pod statuses: %v", churnErr)
	}
	// Heal what the churn left unready, as kubelets would once the
	// readiness probes pass again (kwok makes the new pods Ready); then
	// every set must be back at size, all Ready. A pod's last flip may reach
	// the watch after a heal pass began: heal until none is left.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.err(); err != nil {
			return false, err
		}
		heal := t.unready()
		err := parallel(len(heal), 16, func(i int) error {
			return client.IgnoreNotFound(r.patchStatus(ctx, ns, heal[i], true, false))
		})
		if err != nil {
			return false, fmt.Errorf("making the churned pods Ready again: %w", err)
		}
		p := t.now()
		return len(heal) == 0 && p.live == sh.total() && p.ready == sh.total(), nil
	})
	if err != nil {
		p := t.now()
		b.Fatalf("%s after the churn: waiting for %d Ready pods (live %d, Ready %d): %v", k, sh.total(), p.live, p.ready, err)
	}
	after, err := r.quiesce(ctx, k)
	if err != nil {
		b.Fatal(err)
	}
	res.writes = after.Sub(before).Controller(k.resource(), 0)
	p := t.now()
	res.maxOver, res.overSets = p.maxOver, p.overSets
	if err := c.stop(); err != nil {
		b.Fatal(err)
	}
	t.close()
	if err := r.deleteAll(ctx, k, ns); err != nil {
		b.Fatal(err)
	}
	return res
}

// patchStatus sets a pod's Ready condition, and with fail its phase to
// Failed, as a kubelet would.
func (r *rig) patchStatus(ctx context.Context, ns, name string, ready, fail bool) error {
	status := corev1.ConditionFalse
	if ready && !fail {
		status = corev1.ConditionTrue
	}
	st := map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now(),
	}}}
	if fail {
		st["phase"] = corev1.PodFailed
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	_, err = r.cs.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
