package readiness

import (
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// kstatusOf is what cli-utils' kstatus (Helm's and Flux's wait) computes
// for an object of an unknown kind with these conditions.
func kstatusOf(t *testing.T, generation, observed int64, conds []metav1.Condition) status.Status {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "example.tend.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a", "namespace": "n", "generation": generation},
		"status":   map[string]any{"observedGeneration": observed},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{conds})
	if err != nil {
		t.Fatal(err)
	}
	obj["status"].(map[string]any)["conditions"] = raw["conditions"]
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func TestSet(t *testing.T) {
	cases := []struct {
		name                 string
		generation, observed int64
		summary              Summary
		// want is each condition as "Status/Reason", "" when absent.
		ready, reconciling, stalled string
		kstatus                     status.Status
	}{
		{name: "ready", generation: 2, observed: 2, summary: Summary{StateReady, "AllReplicasReady", "3 of 3"},
			ready: "True/AllReplicasReady", kstatus: status.CurrentStatus},
		{name: "reconciling", generation: 2, observed: 2, summary: Summary{StateReconciling, "ScalingUp", "creating"},
			ready: "False/ScalingUp", reconciling: "True/ScalingUp", kstatus: status.InProgressStatus},
		{name: "stalled", generation: 2, observed: 2, summary: Summary{StateStalled, "InvalidSpec", "fix it"},
			ready: "False/InvalidSpec", stalled: "True/InvalidSpec", kstatus: status.FailedStatus},
		{name: "not ready, nothing to do", generation: 2, observed: 2, summary: Summary{StateNotReady, "Paused", "paused"},
			ready: "False/Paused", kstatus: status.InProgressStatus},
		{name: "a failed pass of a new generation is not Ready", generation: 3, observed: 2,
			summary: Summary{StateReady, "AllReplicasReady", "3 of 3"},
			ready:   "False/" + ReasonNotObserved, reconciling: "True/" + ReasonNotObserved, kstatus: status.InProgressStatus},
		{name: "a failed pass of a new generation stays Stalled", generation: 3, observed: 2,
			summary: Summary{StateStalled, "InvalidSpec", "fix it"},
			ready:   "False/InvalidSpec", stalled: "True/InvalidSpec", kstatus: status.InProgressStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// Start from the opposite verdict, so that stale conditions
			// must be removed.
			conds := []metav1.Condition{
				{Type: Reconciling, Status: metav1.ConditionTrue, Reason: "Old"},
				{Type: Stalled, Status: metav1.ConditionTrue, Reason: "Old"},
				{Type: "Available", Status: metav1.ConditionTrue, Reason: "Kept"},
			}
			Set(&conds, tc.generation, tc.observed, tc.summary)
			show := func(t string) string {
				c := apimeta.FindStatusCondition(conds, t)
				if c == nil {
					return ""
				}
				if t != "Available" {
					g.Expect(c.ObservedGeneration).To(Equal(tc.generation), t)
				}
				return string(c.Status) + "/" + c.Reason
			}
			g.Expect(show(Ready)).To(Equal(tc.ready))
			g.Expect(show(Reconciling)).To(Equal(tc.reconciling))
			g.Expect(show(Stalled)).To(Equal(tc.stalled))
			g.Expect(show("Available")).To(Equal("True/Kept"), "other conditions are left alone")
			g.Expect(kstatusOf(t, tc.generation, tc.observed, conds)).To(Equal(tc.kstatus))
		})
	}
}

func TestFrom(t *testing.T) {
	g := NewWithT(t)
	c := &metav1.Condition{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "ScalingUp", Message: "creating"}
	g.Expect(From(StateReconciling, c, "unused")).To(Equal(Summary{StateReconciling, "ScalingUp", "creating"}))
	g.Expect(From(StateReconciling, nil, "No pass yet")).To(Equal(Summary{StateReconciling, "Unknown", "No pass yet"}))
}
