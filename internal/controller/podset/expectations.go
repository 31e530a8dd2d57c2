package podset

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// expectationTTL bounds how long a PodSet waits for the cache to show its own
// creates and deletes. A create whose pod is deleted before the cache ever
// saw it would otherwise block the PodSet for good; ReplicaSet uses the same
// five minutes.
const expectationTTL = 5 * time.Minute

// expectations records, per PodSet, the pods this controller created that
// the cache has not shown yet and the pods it deleted that the cache still
// shows as live. Until both sets are empty the cache is known to be stale for
// that PodSet, and counting its pods would create or delete too many.
//
// Unlike ReplicaSet's counters, the records hold pod names and are settled
// against the cache's contents on each pass rather than by informer events,
// so the answer depends only on what the cache holds now.
type expectations struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	records map[types.NamespacedName]*expectation
}

type expectation struct {
	creates sets.Set[string] // created; not yet in the cache
	deletes sets.Set[string] // deleted; still live in the cache
	expires time.Time        // the record is dropped after this
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, records: map[types.NamespacedName]*expectation{}}
}

func (e *expectations) record(key types.NamespacedName) *expectation {
	x, ok := e.records[key]
	if !ok {
		x = &expectation{creates: sets.New[string](), deletes: sets.New[string]()}
		e.records[key] = x
	}
	x.expires = e.clock.Now().Add(expectationTTL)
	return x
}

// created records that the pod called name was created for key.
func (e *expectations) created(key types.NamespacedName, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.record(key).creates.Insert(name)
}

// deleted records that the pod called name was deleted for key.
func (e *expectations) deleted(key types.NamespacedName, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.record(key).deletes.Insert(name)
}

// creating calls create, which creates a pod and returns its name, and
// records that name for key once the create succeeded. The apiserver
// generates the name, so nothing can be recorded before; a create that
// failed is never recorded, and so never leaves the PodSet waiting.
// (ReplicaSet counts its creates ahead and lowers the count with
// CreationObserved for each create that failed or was skipped.)
func (e *expectations) creating(key types.NamespacedName, create func() (string, error)) (string, error) {
	name, err := create()
	if err != nil {
		return "", err
	}
	e.created(key, name)
	return name, nil
}

// deleting records that the pod called name is being deleted for key, then
// calls del, which deletes it. The record comes first: once the delete is
// sent, the cache may show the pod gone at any moment.
//
// A delete that failed is struck off again at once, as ReplicaSet's
// manageReplicas calls DeletionObserved for it: the cache will never show a
// delete that did not happen, and the record would hold the PodSet back
// until it expired. NotFound is no failure: the pod is gone already, and the
// record stays until the cache shows that too, so that a pass in between
// does not count the pod as live.
func (e *expectations) deleting(key types.NamespacedName, name string, del func() error) error {
	e.deleted(key, name)
	err := del()
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.records[key]; ok {
		x.deletes.Delete(name)
	}
	return err
}

// satisfied settles key's record against pods, the cache's view of the
// PodSet's pods: a created pod that appears, and a deleted pod that is gone or
// terminating, is struck off. It reports whether nothing is pending and, if
// something is, how long until the record expires.
func (e *expectations) satisfied(key types.NamespacedName, pods []*corev1.Pod) (bool, time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.records[key]
	if !ok {
		return true, 0
	}
	live := sets.New[string]()
	seen := sets.New[string]()
	for _, p := range pods {
		seen.Insert(p.Name)
		if p.DeletionTimestamp == nil {
			live.Insert(p.Name)
		}
	}
	x.creates = x.creates.Difference(seen)
	x.deletes = x.deletes.Intersection(live)
	left := x.expires.Sub(e.clock.Now())
	if x.creates.Len() == 0 && x.deletes.Len() == 0 || left <= 0 {
		delete(e.records, key)
		return true, 0
	}
	return false, left
}

// forget drops key's record, when the PodSet is gone.
func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.records, key)
}
