package etcd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// F1's figures: what one manager costs per EtcdCluster as the fleet grows.
// The pure parts (the audit log, the Prometheus text, the slope and the
// table) are here, tested without a cluster; f1_test.go measures.

// apiRequest is one request of the manager, as the apiserver's audit log
// recorded it.
type apiRequest struct {
	at time.Time
	// key is the verb and the resource, with its subresource: "list pods",
	// "patch etcdclusters/status".
	key string
	// write is a verb that changes something.
	write bool
	// namespace is the object's; empty for a cluster-scoped object or a
	// request across namespaces.
	namespace string
	// election is the manager's leader election (its Lease), a cost of the
	// manager and not of the fleet; scraped the authentication and
	// authorization of a scrape of its metrics (TokenReview,
	// SubjectAccessReview), a cost of the scraper.
	election, scraped bool
}

// auditEvent is the part of an audit.k8s.io/v1 Event that F1 reads.
type auditEvent struct {
	Stage          string    `json:"stage"`
	Verb           string    `json:"verb"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
	} `json:"objectRef"`
}

// readAudit returns user's requests in the audit log r (JSON lines), each
// once: a watch when it starts (stage ResponseStarted), any other request
// when it ends (ResponseComplete, or Panic).
func readAudit(r io.Reader, user string) ([]apiRequest, error) {
	var out []apiRequest
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if e.User.Username != user {
			continue
		}
		if e.Verb == "watch" {
			if e.Stage != "ResponseStarted" {
				continue
			}
		} else if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			continue
		}
		resource, namespace := "(no object)", ""
		if e.ObjectRef != nil {
			resource, namespace = e.ObjectRef.Resource, e.ObjectRef.Namespace
			if e.ObjectRef.Subresource != "" {
				resource += "/" + e.ObjectRef.Subresource
			}
		}
		out = append(out, apiRequest{
			at:        e.StageTimestamp,
			key:       e.Verb + " " + resource,
			namespace: namespace,
			write:     slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, e.Verb),
			election:  resource == "leases" && strings.HasSuffix(e.UserAgent, "/leader-election"),
			scraped:   resource == "tokenreviews" || resource == "subjectaccessreviews",
		})
	}
	return out, sc.Err()
}

// requestCounts counts the requests in [from, to) about namespace ns or
// none, by key, leaving out the leader election and the scrapes' reviews,
// which it counts on their own.
type requestCounts struct {
	byKey              map[string]int
	all, writes, lease int
	scraped            int
}

func countRequests(reqs []apiRequest, ns string, from, to time.Time) requestCounts {
	c := requestCounts{byKey: map[string]int{}}
	for _, q := range reqs {
		if q.at.Before(from) || !q.at.Before(to) {
			continue
		}
		switch {
		case q.election:
			c.lease++
			continue
		case q.scraped:
			c.scraped++
			continue
		case q.namespace != "" && q.namespace != ns:
			continue
		}
		c.all++
		c.byKey[q.key]++
		if q.write {
			c.writes++
		}
	}
	return c
}

// promSum sums the samples of the counter or gauge family in the Prometheus
// text exposition text whose labels include every pair of match, by the
// value of label by ("" sums them all under ""). Histograms and summaries
// are not read.
func promSum(text, family string, match map[string]string, by string) (map[string]float64, error) {
	out := map[string]float64{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("malformed sample %q", line)
			}
			name, rest = line[:i], strings.TrimSpace(line[j+1:])
			for pair := range strings.SplitSeq(line[i+1:j], ",") {
				k, v, ok := strings.Cut(pair, "=")
				if !ok {
					continue
				}
				labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		if name != family {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if !ok {
			continue
		}
		value, _, _ := strings.Cut(rest, " ") // a timestamp may follow
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %w", line, err)
		}
		out[labels[by]] += v
	}
	return out, nil
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

// f1Window is one idle window of one fleet size.
type f1Window struct {
	minutes float64
	api     requestCounts
	// rpcs are the etcd gRPC requests the members served, summed, and by
	// method; passes the etcdcluster controller's reconciles; cpu the
	// manager process's CPU seconds.
	rpcs     float64
	byMethod map[string]float64
	passes   float64
	cpu      float64
}

// f1Size is what F1 measured at one fleet size.
type f1Size struct {
	clusters, members int
	// create is from the first create call to the last cluster's first
	// Available status; perCluster each cluster's own time.
	create     time.Duration
	perCluster []float64
	// createRequests are the manager's requests (leader election left
	// out) from the first create to the last Available.
	createRequests int
	windows        []f1Window
	// heapMiB is the manager's heap in use at the end of the idle
	// windows; change from the change to every cluster settled again.
	heapMiB float64
	change  time.Duration
}

func (s *f1Size) perMinute(of func(*f1Window) float64, per float64) []float64 {
	out := make([]float64, 0, len(s.windows))
	for i := range s.windows {
		w := &s.windows[i]
		out = append(out, of(w)/w.minutes/per)
	}
	return out
}

// f1Row is a row of the table: one value (or spread) per fleet size.
type f1Row struct {
	label string
	// each gives a size's samples; one sample prints as it is.
	each func(*f1Size) []float64
	// slope prints the least-squares slope of the medians over the
	// fleet size: how the figure grows per added cluster.
	slope  bool
	metric string
}

// f1Figures are a run of F1.
type f1Figures struct {
	idle, window time.Duration
	sizes        []*f1Size
	took         time.Duration
}

// keys are the request kinds seen at idle at any size, most frequent first.
func (f *f1Figures) keys() []string {
	total := map[string]float64{}
	for _, s := range f.sizes {
		for _, w := range s.windows {
			for k, n := range w.api.byKey {
				total[k] += float64(n) / w.minutes / float64(s.clusters)
			}
		}
	}
	keys := make([]string, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if total[keys[i]] != total[keys[j]] {
			return total[keys[i]] > total[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// methods are the gRPC methods the members served at idle at any size
// (a member exports every method's counter, most of them at 0).
func (f *f1Figures) methods() []string {
	seen := map[string]bool{}
	for _, s := range f.sizes {
		for _, w := range s.windows {
			for m, n := range w.byMethod {
				if n > 0 {
					seen[m] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func (f *f1Figures) rows() []f1Row {
	one := func(v float64) []float64 { return []float64{v} }
	perCluster := func(of func(*f1Window) float64) func(*f1Size) []float64 {
		return func(s *f1Size) []float64 { return s.perMinute(of, float64(s.clusters)) }
	}
	perMember := func(of func(*f1Window) float64) func(*f1Size) []float64 {
		return func(s *f1Size) []float64 { return s.perMinute(of, float64(s.members)) }
	}
	rows := []f1Row{
		{label: "create → every cluster Available, s", each: func(s *f1Size) []float64 { return one(s.create.Seconds()) }, slope: true, metric: "create_s"},
		{label: "… each cluster's own, s: least / median / greatest", each: func(s *f1Size) []float64 { return s.perCluster }},
		{label: "manager requests per cluster, create → every cluster Available", each: func(s *f1Size) []float64 {
			return one(float64(s.createRequests) / float64(s.clusters))
		}, slope: true},
		{label: "**idle**: manager requests per cluster per minute", each: perCluster(func(w *f1Window) float64 { return float64(w.api.all) }), slope: true, metric: "idle_requests_per_cluster_min"},
		{label: "… of them writes", each: perCluster(func(w *f1Window) float64 { return float64(w.api.writes) }), slope: true, metric: "idle_writes_per_cluster_min"},
	}
	for _, k := range f.keys() {
		rows = append(rows, f1Row{label: "… " + k, each: perCluster(func(w *f1Window) float64 { return float64(w.api.byKey[k]) })})
	}
	rows = append(rows,
		f1Row{label: "idle: leader election requests per minute (the manager's, not per cluster)", each: func(s *f1Size) []float64 {
			return s.perMinute(func(w *f1Window) float64 { return float64(w.api.lease) }, 1)
		}},
		f1Row{label: "idle: reconciles per cluster per minute", each: perCluster(func(w *f1Window) float64 { return w.passes }), slope: true, metric: "idle_passes_per_cluster_min"},
		f1Row{label: "idle: etcd gRPC requests per member per minute", each: perMember(func(w *f1Window) float64 { return w.rpcs }), slope: true, metric: "idle_rpcs_per_member_min"},
	)
	for _, m := range f.methods() {
		rows = append(rows, f1Row{label: "… " + m, each: perMember(func(w *f1Window) float64 { return w.byMethod[m] })})
	}
	rows = append(rows,
		f1Row{label: "idle: manager CPU seconds per minute", each: func(s *f1Size) []float64 {
			return s.perMinute(func(w *f1Window) float64 { return w.cpu }, 1)
		}, slope: true, metric: "idle_cpu_s_min"},
		f1Row{label: "… per cluster", each: perCluster(func(w *f1Window) float64 { return w.cpu }), slope: true},
		f1Row{label: "manager heap in use after the idle windows, MiB", each: func(s *f1Size) []float64 { return one(s.heapMiB) }, slope: true, metric: "heap_mib"},
		f1Row{label: "one change each (member resources: a roll) → every cluster settled, s", each: func(s *f1Size) []float64 { return one(s.change.Seconds()) }, slope: true, metric: "change_s"},
	)
	return rows
}

// spread prints one sample as it is, more as least / median / greatest.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	if len(xs) == 1 {
		return f1Num(xs[0])
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return f1Num(s[0]) + " / " + f1Num(median(s)) + " / " + f1Num(s[len(s)-1])
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s)
}

// f1Num prints v with three significant digits at most, and no exponent.
func f1Num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "–"
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// write prints the table: a column per fleet size, and the slope of each
// figure's medians over the fleet size.
func (f *f1Figures) write(w io.Writer) {
	fmt.Fprintf(w, "F1: EtcdCluster fleets of %s, created together, idle %s in %d windows of %s, then one change each; run %s.\n\n",
		f.sizeList(), f.idle, f.windowCount(), f.window, f.took.Round(time.Second))
	fmt.Fprint(w, "| figure |")
	for _, s := range f.sizes {
		fmt.Fprintf(w, " %d clusters (%d members) |", s.clusters, s.members)
	}
	fmt.Fprintln(w, " slope per added cluster |")
	fmt.Fprint(w, "|---|")
	for range f.sizes {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w, "---|")
	xs := make([]float64, len(f.sizes))
	for i, s := range f.sizes {
		xs[i] = float64(s.clusters)
	}
	for _, r := range f.rows() {
		fmt.Fprintf(w, "| %s |", r.label)
		ys := make([]float64, len(f.sizes))
		for i, s := range f.sizes {
			samples := r.each(s)
			ys[i] = medianOf(samples)
			fmt.Fprintf(w, " %s |", spread(samples))
		}
		if r.slope && len(f.sizes) > 1 {
			fmt.Fprintf(w, " %s |\n", f1Num(slope(xs, ys)))
		} else {
			fmt.Fprintln(w, "  |")
		}
	}
	if len(f.sizes) > 1 {
		first, last := f.sizes[0], f.sizes[len(f.sizes)-1]
		fmt.Fprintf(w, "\nThe fleet of %d against %d alone: create %.2f×, change %.2f×.\n", last.clusters, first.clusters,
			last.create.Seconds()/first.create.Seconds(), last.change.Seconds()/first.change.Seconds())
	}
	fmt.Fprintf(w, "Idle figures are least / median / greatest over the windows; a slope is of the medians.\n")
}

func (f *f1Figures) sizeList() string {
	var parts []string
	for _, s := range f.sizes {
		parts = append(parts, strconv.Itoa(s.clusters))
	}
	return strings.Join(parts, ", ")
}

func (f *f1Figures) windowCount() int {
	if f.window <= 0 {
		return 0
	}
	return int(f.idle / f.window)
}

// metrics are the figures for b.ReportMetric: each row's median at the
// largest size, and its slope.
func (f *f1Figures) metrics() map[string]float64 {
	out := map[string]float64{}
	if len(f.sizes) == 0 {
		return out
	}
	xs := make([]float64, len(f.sizes))
	for i, s := range f.sizes {
		xs[i] = float64(s.clusters)
	}
	last := f.sizes[len(f.sizes)-1]
	for _, r := range f.rows() {
		if r.metric == "" {
			continue
		}
		out[r.metric] = medianOf(r.each(last))
		if len(f.sizes) > 1 {
			ys := make([]float64, len(f.sizes))
			for i, s := range f.sizes {
				ys[i] = medianOf(r.each(s))
			}
			out[r.metric+"_slope"] = slope(xs, ys)
		}
	}
	return out
}
