// Package podset runs PodSets: it keeps spec.replicas pods of a template
// alive, owned through a ControllerRef, and optionally keeps one Ready pod
// labelled as the leader behind a Service.
//
// The pieces, each with its table tests:
//   - expectations.go: what this controller created or deleted that the
//     cache has not shown yet, so that a stale cache never causes a duplicate
//     create or delete.
//   - replicas.go: slow-start batches and the ranking of pods to delete.
//   - claim.go: adoption of matching orphans and release of pods that no
//     longer match.
//   - leader.go: the choice of the leader pod and its Service.
//   - status.go: status and conditions, computed from what was observed.
//   - reconcile.go: the pass that strings them together.
//
// The package must not keep state that matters across restarts: the
// expectations are only a guard against the cache's lag, and a fresh process
// starts with a fresh cache. It never deletes a PodSet's pods on PodSet
// deletion; the garbage collector does, through the ControllerRef.
package podset
