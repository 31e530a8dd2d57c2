package podset

import (
	"testing"

	. "github.com/onsi/gomega"
)

const metricsPage = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps.tend.dev",resource="podsets",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="apps.tend.dev",resource="podsets",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps.tend.dev",resource="podsets",scope="resource",subresource="",verb="POST",version="v1alpha1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 9
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="namespaces",scope="resource",subresource="",verb="POST",version="v1"} 1
apiserver_request_total_other{code="201"} 5
apiserver_request_duration_seconds_count{verb="POST"} 12
`

func TestParseRequests(t *testing.T) {
	g := NewWithT(t)
	got, err := ParseRequests(metricsPage)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(9))
	g.Expect(got[Request{Verb: "POST", Resource: "pods", Code: "201"}]).To(Equal(1000.0))
	g.Expect(got.ByResource(Request.IsWrite)).To(Equal(map[string]float64{
		"pods": 1000, "pods/status": 1000, "podsets/status": 43, "podsets": 1, "events": 2, "leases": 9, "namespaces": 1,
	}))
}

func TestControllerWrites(t *testing.T) {
	g := NewWithT(t)
	before, err := ParseRequests(metricsPage)
	g.Expect(err).NotTo(HaveOccurred())
	after := Requests{}
	for k, v := range before {
		after[k] = 2 * v
	}
	w := after.Sub(before).Controller("podsets", 1)
	g.Expect(w).To(Equal(ControllerWrites{Pods: 1000, Status: 43, Events: 2, Other: 0, Conflicts: 3}),
		"pod status, leases and namespaces are not the controller's; its set's create is the harness's")
	g.Expect(w.Total()).To(Equal(1045.0))
}

func TestParseSamples(t *testing.T) {
	g := NewWithT(t)
	page := `controller_runtime_reconcile_total{controller="podset",result="success"} 12
controller_runtime_reconcile_total{controller="podset",result="error"} 1
controller_runtime_reconcile_total{controller="queue",result="success"} 5
controller_runtime_reconcile_totals{controller="podset"} 100
workqueue_depth 3
label_with_escapes{msg="a \"quoted\", comma"} 2
`
	s, err := ParseSamples(page, "controller_runtime_reconcile_total")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(HaveLen(3))
	g.Expect(Sum(s, map[string]string{"controller": "podset"})).To(Equal(13.0))
	s, err = ParseSamples(page, "workqueue_depth")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal([]Sample{{Labels: map[string]string{}, Value: 3}}))
	s, err = ParseSamples(page, "label_with_escapes")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s[0].Labels["msg"]).To(Equal(`a "quoted", comma`))

	_, err = ParseSamples(`broken{code="200 7`, "broken")
	g.Expect(err).To(HaveOccurred())
}
