package etcd

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// b10Pods follows the member pods of one cluster, as a watch delivers
// them, each moment stamped on receipt: when each pod was first seen, when
// it began to go (a deletionTimestamp, or gone), when it was first Ready,
// and whether it is Ready now. It gives the writer's dialer each member's
// current IP, and the roll its start, its end and each member's restart.
// Only pods that a StatefulSet controls count: Tend's Jobs carry the
// cluster's label too.
type b10Pods struct {
	mu   sync.Mutex
	byID map[types.UID]*b10Pod
	// order is every pod in the order first seen.
	order []*b10Pod
	// target is the image the roll moves to, and n the members; done is
	// the first moment n live pods, and no others, ran target and were
	// Ready.
	target string
	n      int
	done   time.Time
	// changed is closed (and replaced) on every change.
	changed chan struct{}
}

// b10Pod is one member pod, one UID.
type b10Pod struct {
	name  string
	uid   types.UID
	image string
	ip    string
	// seen: first received; going: first received with a deletion
	// timestamp, or as deleted; ready: first received Ready.
	seen, going, ready time.Time
	// readyNow is whether it was Ready when last received.
	readyNow bool
}

func newB10Pods(n int) *b10Pods {
	return &b10Pods{byID: map[types.UID]*b10Pod{}, n: n, changed: make(chan struct{})}
}

// update records pod as received at now; gone says it was deleted.
func (t *b10Pods) update(pod *corev1.Pod, gone bool, now time.Time) {
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "StatefulSet" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byID[pod.UID]
	if p == nil {
		p = &b10Pod{name: pod.Name, uid: pod.UID, seen: now}
		t.byID[pod.UID] = p
		t.order = append(t.order, p)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "etcd" {
			p.image = c.Image
		}
	}
	if pod.Status.PodIP != "" {
		p.ip = pod.Status.PodIP
	}
	if (gone || pod.DeletionTimestamp != nil) && p.going.IsZero() {
		p.going = now
	}
	p.readyNow = !gone && b10PodReady(pod)
	if p.readyNow && p.ready.IsZero() && p.going.IsZero() {
		p.ready = now
	}
	if t.target != "" && t.done.IsZero() && t.allOn(t.target) {
		t.done = now
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// allOn says whether exactly n pods live (not going), all Ready and of
// image; t.mu is held.
func (t *b10Pods) allOn(image string) bool {
	live := 0
	for _, p := range t.order {
		if !p.going.IsZero() {
			continue
		}
		if p.image != image || !p.readyNow {
			return false
		}
		live++
	}
	return live == t.n
}

// setTarget names the image the roll moves to; from now on, the first
// moment every member runs it, Ready, is the roll's end.
func (t *b10Pods) setTarget(image string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.target, t.done = image, time.Time{}
}

// Done is the end of the roll, zero until then, and a channel that is
// closed at the next change.
func (t *b10Pods) Done() (time.Time, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done, t.changed
}

// IP is the IP of the live pod called name, or "" when it has none: a pod
// that is going is not dialled.
func (t *b10Pods) IP(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.order) - 1; i >= 0; i-- {
		if p := t.order[i]; p.name == name && p.going.IsZero() {
			return p.ip
		}
	}
	return ""
}

// snapshot returns copies of the pods, in the order first seen.
func (t *b10Pods) snapshot() []b10Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]b10Pod, 0, len(t.order))
	for _, p := range t.order {
		out = append(out, *p)
	}
	return out
}

// b10PodReady says whether pod's Ready condition is True.
func b10PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// b10FirstGoing is the first moment at or after since that a pod which
// existed before since began to go: the roll's first restart. ok is false
// when none did.
func b10FirstGoing(pods []b10Pod, since time.Time) (time.Time, bool) {
	var first time.Time
	for _, p := range pods {
		if p.seen.After(since) || p.going.IsZero() || p.going.Before(since) {
			continue
		}
		if first.IsZero() || p.going.Before(first) {
			first = p.going
		}
	}
	return first, !first.IsZero()
}

// b10Restart is one member's restart: its old pod began to go, and the
// next pod of its name was Ready.
type b10Restart struct {
	member      string
	going, back time.Time
}

func (r b10Restart) took() time.Duration { return r.back.Sub(r.going) }

// b10Restarts are the restarts of pods that began to go at or after
// since and whose successor was Ready, in the order they began.
func b10Restarts(pods []b10Pod, since time.Time) []b10Restart {
	var out []b10Restart
	for i, p := range pods {
		if p.going.IsZero() || p.going.Before(since) {
			continue
		}
		for _, next := range pods[i+1:] {
			if next.name == p.name && !next.ready.IsZero() {
				out = append(out, b10Restart{member: p.name, going: p.going, back: next.ready})
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b b10Restart) int { return a.going.Compare(b.going) })
	return out
}

// b10PodMarks are the pods' moments, for a sample's timeline.
func b10PodMarks(pods []b10Pod) []mark {
	var out []mark
	for _, p := range pods {
		id := string(p.uid)
		if len(id) > 5 {
			id = id[:5]
		}
		tag := p.image
		if i := strings.LastIndexByte(tag, ':'); i >= 0 {
			tag = tag[i+1:]
		}
		out = append(out, mark{p.seen, fmt.Sprintf("pod %s (%s) seen, %s", p.name, id, tag)})
		if !p.ready.IsZero() {
			out = append(out, mark{p.ready, fmt.Sprintf("pod %s (%s) Ready", p.name, id)})
		}
		if !p.going.IsZero() {
			out = append(out, mark{p.going, fmt.Sprintf("pod %s (%s) going", p.name, id)})
		}
	}
	return out
}
