package statemetrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Source is what one controller exports: the gauges it may emit (besides
// tend_resource_condition), and how it lists its objects from the cache
// and emits them. Collect is given the cache's own objects: it must not
// change them.
type Source struct {
	Descs   []*prometheus.Desc
	Collect func(ctx context.Context, r client.Reader, e *Emitter) error
}

// scrapeTimeout bounds the reads of one scrape; the cache answers at once
// unless it is not synced yet.
const scrapeTimeout = 10 * time.Second

var (
	conditionDesc = prometheus.NewDesc("tend_resource_condition",
		"A condition of a Tend object: 1 for its current status and reason.",
		[]string{"kind", "namespace", "name", "type", "status", "reason"}, nil)
	// ScrapeErrors counts the scrapes whose reads of a kind failed (the
	// series of that kind are missing from them).
	ScrapeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tend_state_metrics_errors_total",
		Help: "Scrapes of tend_* state gauges whose reads of a kind failed; those series were left out.",
	})
)

// Emitter writes the gauges of one scrape.
type Emitter struct{ ch chan<- prometheus.Metric }

// Gauge emits one sample of desc with the label values in desc's order.
func (e *Emitter) Gauge(desc *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
}

// Conditions emits tend_resource_condition for each of an object's
// conditions.
func (e *Emitter) Conditions(kind string, obj metav1.Object, conds []metav1.Condition) {
	for _, c := range conds {
		e.Gauge(conditionDesc, 1, kind, obj.GetNamespace(), obj.GetName(), c.Type, string(c.Status), c.Reason)
	}
}

// Bool is 1 for true and 0 for false.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// NewCollector is the prometheus.Collector of sources, reading r. Add
// registers one for the manager; tests collect from one of their own.
func NewCollector(r client.Reader, sources ...Source) prometheus.Collector {
	return &collector{reader: readOnly{r}, sources: sources}
}

// readOnly lists the cache's own objects, not copies of them: a Source
// only reads what it lists, and must not change it. Copying every object
// of every kind at every scrape was 15% of the manager's allocations in
// F2 (1,000 PodSets, read each second by the benchmark).
type readOnly struct{ client.Reader }

func (r readOnly) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.Reader.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...)
}

// collector is the prometheus.Collector of the sources.
type collector struct {
	reader  client.Reader
	sources []Source
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- conditionDesc
	for _, s := range c.sources {
		for _, d := range s.Descs {
			ch <- d
		}
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	e := &Emitter{ch: ch}
	for _, s := range c.sources {
		if err := s.Collect(ctx, c.reader, e); err != nil {
			ScrapeErrors.Inc()
			ctrl.Log.WithName("statemetrics").Error(err, "Reading the objects for their metrics")
		}
	}
}

// Add registers the sources' gauges with controller-runtime's registry
// while mgr is the leader, reading mgr's cache.
func Add(mgr manager.Manager, sources []Source) error {
	if len(sources) == 0 {
		return nil
	}
	return mgr.Add(&exporter{reg: metrics.Registry, c: NewCollector(mgr.GetCache(), sources...)})
}

// exporter registers the collector for as long as it runs.
type exporter struct {
	reg prometheus.Registerer
	c   prometheus.Collector
}

// NeedLeaderElection: only the leader exports.
func (x *exporter) NeedLeaderElection() bool { return true }

func (x *exporter) Start(ctx context.Context) error {
	if err := x.reg.Register(x.c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			// Another manager in this process (tests) exports them.
			<-ctx.Done()
			return nil
		}
		return err
	}
	<-ctx.Done()
	x.reg.Unregister(x.c)
	return nil
}

func init() { metrics.Registry.MustRegister(ScrapeErrors) }
