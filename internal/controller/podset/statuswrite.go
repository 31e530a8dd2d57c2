package podset

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// The status write. A pass reads its PodSet from the cache, which often
// has not yet seen the previous pass's own status write: a write guarded
// by the resourceVersion then fails with a 409 (one status write in five
// in B1's 100 sets × 100 pods), costing a refused PATCH, a GET and a
// second PATCH. The status is computed afresh each pass from the pods and
// the spec, not from the previous status, so what it must not outrun is
// the spec it describes, not the resourceVersion. So a pass writes its
// whole status in a JSON patch that first tests the PodSet's UID and
// generation: it fails only when the spec changed since the pass read it
// (or the PodSet was re-created), and is then left to the pass that the
// change starts. Writes to one PodSet never race each other: the
// workqueue runs one pass per PodSet at a time, and the manager's write
// fence keeps a deposed leader from writing.
//
// A PodSet status write costs the apiserver several times a ReplicaSet's
// (JSON, schema, managedFields, and a conversion for the second version's
// watch cache: see docs/benchmarks.md, B1), and each one comes back to the
// manager as a watch event. So a write that only moves counts (replicas,
// ready pods, pod names, the messages that quote them) waits until
// progressInterval has passed since the PodSet's last write, and the pass
// asks to run again then; a write that changes a condition's status or
// reason, the observed generation, the leader or the selector goes at
// once. The last write of a scale-up, which turns Available True, is never
// held back.

// statusMemo remembers, per PodSet, the status its last pass wrote, for
// as long as the cache still shows the PodSet that pass read, so that a
// pass that reads the older status from the cache neither writes the same
// status again nor skips a write because the cache's stale status happens
// to match. Once the cache shows anything newer, it knows better.
type statusMemo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]writtenStatus
}

type writtenStatus struct {
	uid types.UID
	// read is the resourceVersion of the PodSet the writing pass read.
	read   string
	status appsv1alpha1.PodSetStatus
	// at is when it was written.
	at time.Time
}

// progressInterval is the least time between two status writes of one
// PodSet that only move counts.
const progressInterval = time.Second

// known returns the status that the apiserver holds as far as this
// process knows: the one it last wrote, while the cache has not moved
// since the pass that wrote it; otherwise the cached one. It also returns
// when this process last wrote the PodSet's status (zero if unknown).
func (s *statusMemo) known(cached *appsv1alpha1.PodSet) (appsv1alpha1.PodSetStatus, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := client.ObjectKeyFromObject(cached)
	w, ok := s.m[key]
	switch {
	case !ok:
		return cached.Status, time.Time{}
	case w.uid != cached.UID:
		delete(s.m, key)
		return cached.Status, time.Time{}
	case w.read != "" && w.read == cached.ResourceVersion:
		return w.status, w.at
	}
	// The cache has moved on: it knows the status better. Only the time
	// of the write is kept, for the spacing of progress writes.
	s.m[key] = writtenStatus{uid: w.uid, at: w.at}
	return cached.Status, w.at
}

// remember notes that a pass which read the PodSet read wrote ps's status
// at now.
func (s *statusMemo) remember(read, ps *appsv1alpha1.PodSet, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.NamespacedName]writtenStatus{}
	}
	s.m[client.ObjectKeyFromObject(ps)] = writtenStatus{uid: read.UID, read: read.ResourceVersion, status: *ps.Status.DeepCopy(), at: now}
}

// onlyProgress tells whether next differs from known only in counts: the
// replicas, the ready pods, the pod names and the conditions' messages.
func onlyProgress(known, next appsv1alpha1.PodSetStatus) bool {
	if known.ObservedGeneration != next.ObservedGeneration || known.Leader != next.Leader ||
		known.Selector != next.Selector || len(known.Conditions) != len(next.Conditions) {
		return false
	}
	for _, c := range next.Conditions {
		k := meta.FindStatusCondition(known.Conditions, c.Type)
		if k == nil || k.Status != c.Status || k.Reason != c.Reason || k.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// forget drops what is remembered of a PodSet: it is gone, or its write
// failed.
func (s *statusMemo) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// statusPatch is the JSON patch that writes ps's whole status, provided
// the PodSet still has the UID and generation that the pass read.
func statusPatch(read, ps *appsv1alpha1.PodSet) ([]byte, error) {
	return json.Marshal([]jsonPatchOp{
		{Op: "test", Path: "/metadata/uid", Value: read.UID},
		{Op: "test", Path: "/metadata/generation", Value: read.Generation},
		// "add" sets a member that exists, and one that does not yet.
		{Op: "add", Path: "/status", Value: ps.Status},
	})
}

// patchStatus writes ps's status, unless the apiserver already holds it
// (as far as the cache and the memo tell), guarded by the UID and
// generation that the pass read (before). When the guard fails because
// the spec changed or the PodSet was re-created, it returns an error that
// says so, and the next pass recomputes from fresh observations.
//
// A write that only moves counts within progressInterval of the PodSet's
// last write is not made: patchStatus returns how long to wait before the
// pass that makes it.
func (r *Reconciler) patchStatus(ctx context.Context, before, ps *appsv1alpha1.PodSet) (time.Duration, error) {
	known, last := r.statuses.known(before)
	if equality.Semantic.DeepEqual(known, ps.Status) {
		return 0, nil
	}
	now := r.Clock.Now()
	if wait := last.Add(progressInterval).Sub(now); !last.IsZero() && wait > 0 && onlyProgress(known, ps.Status) {
		return wait, nil
	}
	key := client.ObjectKeyFromObject(ps)
	patch, err := statusPatch(before, ps)
	if err != nil {
		return 0, fmt.Errorf("writing the status: %w", err)
	}
	err = r.Status().Patch(ctx, ps, client.RawPatch(types.JSONPatchType, patch))
	if err == nil {
		r.statuses.remember(before, ps, now)
		return 0, nil
	}
	r.statuses.forget(key)
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		// A failed test is a 422, as is a status the apiserver refuses:
		// what the PodSet holds now tells them apart.
		fresh := &appsv1alpha1.PodSet{}
		if gerr := r.APIReader.Get(ctx, key, fresh); gerr != nil {
			return 0, fmt.Errorf("writing the status: %w", client.IgnoreNotFound(gerr))
		}
		if fresh.UID != before.UID || fresh.Generation != before.Generation {
			return 0, fmt.Errorf("writing the status: the PodSet changed during the pass (generation %d, now %d)",
				before.Generation, fresh.Generation)
		}
	}
	return 0, fmt.Errorf("writing the status: %w", err)
}
