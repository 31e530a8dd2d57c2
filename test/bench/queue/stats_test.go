package queue

import (
	"math"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// steady makes a series sampled every 100ms with rate calls per second.
func steady(rate int, d time.Duration) Series {
	var s Series
	for t := time.Duration(0); t <= d; t += 100 * time.Millisecond {
		s = append(s, Sample{At: t, Calls: int(math.Round(float64(rate) * t.Seconds()))})
	}
	return s
}

func TestCallsAt(t *testing.T) {
	s := Series{{At: time.Second, Calls: 3}, {At: 2 * time.Second, Calls: 7}}
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{0, 0},
		{time.Second, 3},
		{1500 * time.Millisecond, 3},
		{2 * time.Second, 7},
		{time.Hour, 7},
	} {
		NewWithT(t).Expect(s.CallsAt(tc.at)).To(Equal(tc.want), "at %s", tc.at)
	}
}

func TestPerSecond(t *testing.T) {
	g := NewWithT(t)
	g.Expect(steady(50, 5*time.Second).PerSecond(time.Second, 4*time.Second)).To(Equal([]int{50, 50, 50}))
	// A lockstep spike: 300 calls in the third second, none otherwise.
	spike := Series{{0, 0}, {2 * time.Second, 0}, {2500 * time.Millisecond, 300}, {5 * time.Second, 300}}
	g.Expect(spike.PerSecond(0, 5*time.Second)).To(Equal([]int{0, 0, 300, 0, 0}))
	g.Expect(spike.PerSecond(0, 2500*time.Millisecond)).To(Equal([]int{0, 0}), "a partial last second is dropped")
}

func TestBurstNeeded(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Series
		qps  float64
		want float64
	}{
		{"steady under the rate needs no burst", steady(50, 10*time.Second), 100, 0},
		{"steady at the rate needs none", steady(100, 10*time.Second), 100, 0},
		{"steady over the rate needs more the longer it lasts", steady(150, 10*time.Second), 100, 500},
		{"a spike needs its excess over the rate", Series{{0, 0}, {time.Second, 0}, {1100 * time.Millisecond, 300}, {5 * time.Second, 300}}, 100, 290},
		{"no samples", nil, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.s.BurstNeeded(0, time.Hour, tc.qps)).To(BeNumerically("~", tc.want, 1e-6))
		})
	}
	// Only the window counts: the same spike outside it needs nothing.
	spike := Series{{0, 0}, {time.Second, 0}, {1100 * time.Millisecond, 300}, {5 * time.Second, 300}}
	NewWithT(t).Expect(spike.BurstNeeded(2*time.Second, 5*time.Second, 100)).To(BeZero())
}

func TestSummarize(t *testing.T) {
	g := NewWithT(t)
	var values []float64
	for i := 100; i >= 1; i-- { // unsorted on purpose
		values = append(values, float64(i))
	}
	g.Expect(Summarize(values)).To(Equal(Summary{N: 100, Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}))
	g.Expect(Summarize([]float64{7})).To(Equal(Summary{N: 1, Mean: 7, P50: 7, P90: 7, P99: 7, Max: 7}))
	g.Expect(Summarize(nil)).To(Equal(Summary{}))
}

func TestPerQueueHour(t *testing.T) {
	g := NewWithT(t)
	// 1000 queues, two calls each per 30s poll, for 90s: 240 per queue-hour.
	g.Expect(PerQueueHour(6000, 1000, 90*time.Second)).To(BeNumerically("~", 240, 1e-9))
	g.Expect(PerQueueHour(10, 0, time.Minute)).To(BeZero())
	g.Expect(PerQueueHour(10, 5, 0)).To(BeZero())
}

func TestWritesByResource(t *testing.T) {
	exposition := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="sqs.tend.dev",resource="queues",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 12
apiserver_request_total{code="409",component="apiserver",dry_run="",group="sqs.tend.dev",resource="queues",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="sqs.tend.dev",resource="queues",scope="resource",subresource="",verb="PATCH",version="v1alpha1"} 5
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 3e+00
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 7
apiserver_request_duration_seconds_count{verb="PATCH",resource="queues"} 99
`
	NewWithT(t).Expect(WritesByResource(exposition)).To(Equal(map[string]float64{
		"queues/status": 13, "queues": 5, "configmaps": 3,
	}))
}
