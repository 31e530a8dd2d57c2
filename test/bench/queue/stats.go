package queue

import (
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is a cumulative count of upstream calls at a moment of the run.
type Sample struct {
	// At is the time since the sampler started.
	At time.Duration
	// Calls is every call counted up to At.
	Calls int
}

// Series is a run's samples, in time order.
type Series []Sample

// CallsAt returns the cumulative count at the last sample taken at or before
// t, or zero before the first sample.
func (s Series) CallsAt(t time.Duration) int {
	i := sort.Search(len(s), func(i int) bool { return s[i].At > t })
	if i == 0 {
		return 0
	}
	return s[i-1].Calls
}

// PerSecond returns the calls in each whole second of [from, to): the figure
// to hold against a bucket's QPS. A last partial second is dropped.
func (s Series) PerSecond(from, to time.Duration) []int {
	var out []int
	for t := from; t+time.Second <= to; t += time.Second {
		out = append(out, s.CallsAt(t+time.Second)-s.CallsAt(t))
	}
	return out
}

// BurstNeeded returns the smallest burst that a token bucket of qps would
// need to have let through every call counted in [from, to]: the largest
// excess, over any span between two samples, of the calls in that span over
// qps times its length. A bucket of (qps, burst) guarantees BurstNeeded ≤
// burst, whatever the span, so a larger figure means calls bypassed it.
//
// It is the max over j of (C_j - qps·t_j) - min over i<j of (C_i - qps·t_i),
// in one pass.
func (s Series) BurstNeeded(from, to time.Duration, qps float64) float64 {
	level := func(x Sample) float64 { return float64(x.Calls) - qps*x.At.Seconds() }
	need, low, started := 0.0, 0.0, false
	for _, x := range s {
		if x.At < from || x.At > to {
			continue
		}
		if !started {
			low, started = level(x), true
			continue
		}
		need = max(need, level(x)-low)
		low = min(low, level(x))
	}
	return need
}

// Summary describes a distribution of values.
type Summary struct {
	N                        int
	Mean, P50, P90, P99, Max float64
}

// Summarize returns the mean and nearest-rank percentiles of values; the
// zero Summary for none.
func Summarize(values []float64) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	sorted := slices.Sorted(slices.Values(values))
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	return Summary{
		N:    len(sorted),
		Mean: sum / float64(len(sorted)),
		P50:  percentile(sorted, 50),
		P90:  percentile(sorted, 90),
		P99:  percentile(sorted, 99),
		Max:  sorted[len(sorted)-1],
	}
}

// percentile is the nearest-rank percentile p of sorted, which is not empty.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// PerQueueHour scales calls counted over a window of queues to calls per
// queue per hour.
func PerQueueHour(calls, queues int, window time.Duration) float64 {
	if queues == 0 || window <= 0 {
		return 0
	}
	return float64(calls) / float64(queues) / window.Hours()
}

// writeVerbs are the apiserver's verbs that change something.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true}

var metricLabel = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// WritesByResource sums the apiserver_request_total counters of write verbs
// in a Prometheus text exposition, by resource ("queues", or with its
// subresource, "queues/status").
func WritesByResource(exposition string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.SplitSeq(exposition, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for _, m := range metricLabel.FindAllStringSubmatch(labels, -1) {
			l[m[1]] = m[2]
		}
		if !writeVerbs[l["verb"]] {
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		out[res] += n
	}
	return out
}
