package podset

import (
	"testing"

	. "github.com/onsi/gomega"
)

const managerPage = `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="podset",result="success"} 990
controller_runtime_reconcile_total{controller="podset",result="requeue_after"} 10
controller_runtime_reconcile_total{controller="podset",result="error"} 2
controller_runtime_reconcile_total{controller="queue",result="success"} 7
controller_runtime_active_workers{controller="podset"} 1
controller_runtime_active_workers{controller="queue"} 3
workqueue_depth{controller="podset",name="podset",priority="0"} 4
workqueue_depth{controller="podset",name="podset",priority="-100"} 1
workqueue_depth{controller="queue",name="queue",priority="0"} 9
go_memstats_heap_inuse_bytes 2.68435456e+08
process_resident_memory_bytes 4.2e+08
`

func TestParseManagerState(t *testing.T) {
	g := NewWithT(t)
	s, err := ParseManagerState(managerPage, "podset")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(ManagerState{Passes: 1002, Depth: 5, Active: 1, HeapInuse: 256 << 20, RSS: 4.2e8}))
	g.Expect(mib(s.HeapInuse)).To(Equal("256"))

	// Before its first pass a manager has no series of the controller yet.
	s, err = ParseManagerState("go_memstats_heap_inuse_bytes 1024\nprocess_resident_memory_bytes 2048\n", "podset")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(ManagerState{HeapInuse: 1024, RSS: 2048}))

	_, err = ParseManagerState(`controller_runtime_reconcile_total{controller="podset"} 1`, "podset")
	g.Expect(err).To(MatchError(ContainSubstring("go_memstats_heap_inuse_bytes")), "a page without the Go collector's series")
}

func TestLookedAtAll(t *testing.T) {
	for _, tt := range []struct {
		name  string
		state ManagerState
		want  bool
	}{
		{"no pass yet", ManagerState{}, false},
		{"fewer passes than sets", ManagerState{Passes: 999}, false},
		{"keys still queued", ManagerState{Passes: 1500, Depth: 1}, false},
		{"a pass running", ManagerState{Passes: 1000, Active: 1}, false},
		{"queue drained after every set", ManagerState{Passes: 1000}, true},
		{"more passes than sets, drained", ManagerState{Passes: 1800}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.state.LookedAtAll(1000)).To(Equal(tt.want))
		})
	}
}

func TestIdleWrites(t *testing.T) {
	g := NewWithT(t)
	window := Requests{
		{Verb: "PUT", Group: "coordination.k8s.io", Resource: "leases", Code: "200"}:                     30,
		{Verb: "PATCH", Resource: "nodes", Subresource: "status", Code: "200"}:                           10,
		{Verb: "PATCH", Resource: "pods", Subresource: "status", Code: "200"}:                            2,
		{Verb: "GET", Resource: "pods", Code: "200"}:                                                     50,
		{Verb: "LIST", Group: "apps.tend.dev", Resource: "podsets", Code: "200"}:                         3,
		{Verb: "PATCH", Group: "apps.tend.dev", Resource: "podsets", Subresource: "status", Code: "200"}: 4,
		{Verb: "POST", Group: "events.k8s.io", Resource: "events", Code: "201"}:                          1,
		{Verb: "DELETE", Resource: "pods", Code: "200"}:                                                  2,
	}
	g.Expect(IdleWrites(window)).To(Equal(7.0), "kwok's Leases, Node and pod status writes and every read are left out")
	g.Expect(IdleWrites(Requests{})).To(BeZero())
}

func TestChangedSets(t *testing.T) {
	g := NewWithT(t)
	before := map[string]string{"s000": "10", "s001": "11", "s002": "12", "s003": "13"}
	after := map[string]string{"s000": "20", "s001": "11", "s002": "22"}
	stale := map[string]bool{"s000": true, "s001": true}
	staleChanged, freshChanged := ChangedSets(before, after, stale)
	g.Expect(staleChanged).To(Equal(1), "s000 was written, s001 not")
	g.Expect(freshChanged).To(Equal(2), "s002 was written and s003 is gone")
}

func TestStaleNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(StaleNames(1000, 4)).To(Equal([]string{"s000", "s250", "s500", "s750"}))
	g.Expect(StaleNames(3, 10)).To(Equal([]string{"s000", "s001", "s002"}), "at most every set")
	g.Expect(StaleNames(20, 0)).To(BeEmpty())
	g.Expect(listCounts([]float64{0, 1, 100})).To(Equal("0; 1; 100"))
}
