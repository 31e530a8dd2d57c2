package podset

import (
	"fmt"
	"strings"
)

// ManagerState is what F2 reads from tend manager's own /metrics page: the
// podset controller's progress, and the process's memory.
type ManagerState struct {
	// Passes is controller_runtime_reconcile_total of the controller, every
	// result.
	Passes float64
	// Depth is workqueue_depth of its queue: keys waiting for a worker,
	// not those held back by a RequeueAfter.
	Depth float64
	// Active is controller_runtime_active_workers: passes running now.
	Active float64
	// HeapInuse is go_memstats_heap_inuse_bytes: the heap's spans in use,
	// garbage not yet collected included.
	HeapInuse float64
	// RSS is process_resident_memory_bytes.
	RSS float64
}

// ParseManagerState reads a ManagerState for the named controller from a
// manager's /metrics text. Every series must be there, except the
// controller's own before its first pass: a manager serves its metrics
// before its caches have synced and its workers started.
func ParseManagerState(text, controller string) (ManagerState, error) {
	var s ManagerState
	byController := map[string]string{"controller": controller}
	for _, m := range []struct {
		name  string
		match map[string]string
		into  *float64
		must  bool
	}{
		{"controller_runtime_reconcile_total", byController, &s.Passes, false},
		{"workqueue_depth", byController, &s.Depth, false},
		{"controller_runtime_active_workers", byController, &s.Active, false},
		{"go_memstats_heap_inuse_bytes", nil, &s.HeapInuse, true},
		{"process_resident_memory_bytes", nil, &s.RSS, true},
	} {
		samples, err := ParseSamples(text, m.name)
		if err != nil {
			return ManagerState{}, err
		}
		if m.must && len(samples) == 0 {
			return ManagerState{}, fmt.Errorf("no %s in the manager's metrics", m.name)
		}
		*m.into = Sum(samples, m.match)
	}
	return s, nil
}

// LookedAtAll reports whether the manager has had a pass of each of sets
// sets since it started. controller-runtime starts a controller's workers
// only once its sources' handlers have seen every object of the initial
// list (the Kind source waits for its handler registration's HasSynced),
// so every set's key is in the queue before the first pass; once at least
// sets passes have run, the queue is empty and no pass is running, none of
// those keys is left.
func (s ManagerState) LookedAtAll(sets int) bool {
	return s.Passes >= float64(sets) && s.Depth == 0 && s.Active == 0
}

// IdleWrites are a window's writes by anyone but kwok: every write except
// pod status, Node and Lease writes (WriterOf's WriterKubelet), which kwok
// makes as the kubelets do. At idle the harness writes nothing, so they
// are the controller's.
func IdleWrites(window Requests) float64 {
	return window.Sum(func(q Request) bool { return q.IsWrite() && WriterOf(q) != WriterKubelet })
}

// ChangedSets compares the sets' resourceVersions before and after a
// window (by name) and counts the changed ones among the stale sets and
// among the rest. A set whose status was written has a new
// resourceVersion; one that is gone counts as changed.
func ChangedSets(before, after map[string]string, stale map[string]bool) (staleChanged, freshChanged int) {
	for name, rv := range before {
		if after[name] == rv {
			continue
		}
		if stale[name] {
			staleChanged++
		} else {
			freshChanged++
		}
	}
	return staleChanged, freshChanged
}

// StaleNames picks n of the names s000 … s<sets-1> (the sets that
// rig.sets makes), spread evenly over them.
func StaleNames(sets, n int) []string {
	n = min(n, sets)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i*sets/n)
	}
	return names
}

// mib formats bytes in MiB.
func mib(bytes float64) string { return fmt.Sprintf("%.0f", bytes/(1<<20)) }

// listCounts formats one count per sample, separated by "; ".
func listCounts(xs []float64) string {
	cells := make([]string, len(xs))
	for i, x := range xs {
		cells[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(cells, "; ")
}
