//go:build e2e

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// defragmentAnnotation asks for a defragmentation round (the EtcdCluster
// contract, spelled out).
const defragmentAnnotation = "etcd.tend.dev/defragment"

// The manager is killed at a random point of defragmentation rounds of a
// 3-member EtcdCluster under a writer, its database filled with history
// and compacted so that each member's defragmentation takes a while. After
// each kill the round completes with every member in its results. The
// members' own logs ("starting defragment", "finished defragment") show
// that no two members were ever defragmented at once: the overlaps are
// the row's duplicates. At the end every acknowledged write reads back and
// the members hash alike.
func TestEtcdDefragManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdCluster defragmentation, manager SIGKILL")
	ctx := t.Context()
	const n = 3
	e := newEtcdWith(t, cluster.Namespace(t), n, nil)
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	cli := e.client(t)
	value := strings.Repeat("d", 16<<10)
	for round := range 3 { // 24 MiB, two thirds of it history
		for k := range 512 {
			ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
			_, err := cli.Put(ctx, fmt.Sprintf("history/%03d", k), value[round:])
			cancel()
			if err != nil {
				t.Fatalf("filling the history: %v", err)
			}
		}
	}
	compactCtx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err := cli.Compact(compactCtx, e.revision(t))
	cancel()
	if err != nil {
		t.Fatalf("compacting: %v", err)
	}
	w := startWriter(t, cli)

	r.Duplicates = 0
	for i := range scaled() {
		// A round of three members takes about 10s (a step every 2s); the
		// kill falls anywhere in it.
		delay := time.Duration(random(t).Int64N(int64(10 * time.Second)))
		request := time.Now().UTC().Format(time.RFC3339Nano)
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, defragmentAnnotation, request)
		ec := &etcdv1alpha1.EtcdCluster{}
		ec.Namespace, ec.Name = e.Namespace, e.Name
		if err := cluster.Client.Patch(ctx, ec, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("round %d (kill %s in)", i+1, delay.Round(time.Millisecond)))
		round := e.waitRound(t, request)
		e.waitReady(t, n)
		overlaps := e.defragOverlaps(t)
		r.Duplicates = max(r.Duplicates, len(overlaps))
		if len(overlaps) > 0 {
			t.Errorf("round %d: members defragmented at the same time: %v", i+1, overlaps)
		}
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Round %d: manager %s killed %s in, a new one led after %.1fs; the round took %v with %d results; no overlap; %d writes acknowledged so far",
			i+1, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), round.Members, len(round.Results), w.Acked())
	}
	e.checkWrites(t, r, w, q)
}

// waitRound waits until the round that answers request completes with
// every member in its results.
func (e *etcdHandle) waitRound(t *testing.T, request string) *etcdv1alpha1.DefragmentationStatus {
	t.Helper()
	var round *etcdv1alpha1.DefragmentationStatus
	cluster.WaitFor(t, 5*time.Minute, "the defragmentation round "+request, func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if m := ec.Status.Maintenance; m != nil {
			round = m.Defragmentation
		}
		switch {
		case round == nil || round.Request != request:
			return false, fmt.Errorf("status.maintenance.defragmentation is %+v", round)
		case round.Phase == etcdv1alpha1.DefragmentationStalled:
			return false, fmt.Errorf("the round stalled: %s", round.Message)
		case round.Phase != etcdv1alpha1.DefragmentationCompleted:
			return false, fmt.Errorf("the round is %s with %d results", round.Phase, len(round.Results))
		}
		var done []string
		for _, res := range round.Results {
			done = append(done, res.Member)
		}
		for _, m := range round.Members {
			if !slices.Contains(done, m) {
				return false, fmt.Errorf("the round completed without %s", m)
			}
		}
		return true, nil
	})
	return round
}

// defragSpan is one defragmentation of one member, as its log says.
type defragSpan struct {
	member     string
	start, end time.Time
}

// defragOverlaps reads every member's log and returns the pairs of
// defragmentations of two members that overlapped in time.
func (e *etcdHandle) defragOverlaps(t *testing.T) []string {
	t.Helper()
	pods, err := e.pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var spans []defragSpan
	for _, p := range pods {
		spans = append(spans, e.defragSpans(t, p)...)
	}
	var overlaps []string
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.member != b.member && a.start.Before(b.end) && b.start.Before(a.end) {
				overlaps = append(overlaps, fmt.Sprintf("%s %s–%s and %s %s–%s", a.member, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli),
					b.member, b.start.Format(time.StampMilli), b.end.Format(time.StampMilli)))
			}
		}
	}
	return overlaps
}

// defragSpans parses pod's etcd log for its defragmentations.
func (e *etcdHandle) defragSpans(t *testing.T, pod corev1.Pod) []defragSpan {
	t.Helper()
	data, err := cluster.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "etcd"}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading the log of %s: %v", pod.Name, err)
	}
	var spans []defragSpan
	var open *defragSpan
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			TS  time.Time `json:"ts"`
			Msg string    `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		switch line.Msg {
		case "starting defragment":
			open = &defragSpan{member: pod.Name, start: line.TS}
		case "finished defragment":
			if open != nil {
				open.end = line.TS
				spans = append(spans, *open)
				open = nil
			}
		}
	}
	if open != nil {
		open.end = time.Now() // still running
		spans = append(spans, *open)
	}
	return spans
}
