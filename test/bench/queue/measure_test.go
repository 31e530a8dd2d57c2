package queue

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// sampleEvery is how often the sampler reads the proxy's count: fine enough
// to see a lockstep peak inside a second, and to check the bucket over spans
// shorter than a second.
const sampleEvery = 100 * time.Millisecond

// sampler records the proxy's cumulative count of calls every sampleEvery,
// so that rates per second, and the bucket over any span, can be read after
// the fact.
type sampler struct {
	rig    *rig
	start  time.Time
	mu     sync.Mutex
	series Series
	stop   chan struct{}
	done   chan struct{}
}

func (r *rig) startSampler() *sampler {
	s := &sampler{rig: r, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	s.take()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.take()
			}
		}
	}()
	return s
}

func (s *sampler) take() {
	at, calls := s.now(), s.rig.proxy.Total()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series = append(s.series, Sample{At: at, Calls: calls})
}

// now is the time on the sampler's clock.
func (s *sampler) now() time.Duration { return time.Since(s.start) }

// close stops sampling and returns the series.
func (s *sampler) close() Series {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.series
}

// operations are the SQS calls that the Reconciler makes. Calls of any other
// operation show up as the difference to the proxy's total.
var operations = []string{
	"GetQueueAttributes", "ListQueueTags", "GetQueueUrl", "CreateQueue",
	"SetQueueAttributes", "TagQueue", "UntagQueue", "DeleteQueue",
}

// snapshot is what the run had counted at one moment.
type snapshot struct {
	at time.Duration // on the sampler's clock
	// calls by operation, as the proxy counted them, and their total.
	calls map[string]int
	total int
	// limiter is the variant's own count of calls sent and refused.
	limiter tendaws.Stats
	// writes counts the apiserver's write requests by resource.
	writes map[string]float64
	// versions is the resourceVersion of every Queue and ConfigMap in the
	// namespace.
	versions map[string]string
	cpu      cpuTimes
}

// snap reads every counter. It fails the benchmark when the apiserver cannot
// be read: without it there is no figure to report.
func (r *rig) snap(b *testing.B, s *sampler, ns string, limiters *tendaws.Limiters) snapshot {
	b.Helper()
	out := snapshot{at: s.now(), calls: map[string]int{}, total: r.proxy.Total(), limiter: limiters.Stats(r.endpoint)}
	for _, op := range operations {
		out.calls[op] = r.proxy.CountOperation(op)
	}
	var err error
	if out.writes, err = r.apiserverWrites(); err != nil {
		b.Fatalf("reading the apiserver's metrics: %v", err)
	}
	if out.versions, err = r.versions(ns); err != nil {
		b.Fatalf("listing the namespace's objects: %v", err)
	}
	out.cpu = readCPU(r.moto.Pid())
	return out
}

// window is what happened between two snapshots.
type window struct {
	from, to time.Duration
	calls    map[string]int
	total    int
	// sent and refused are the limiter's own counts: refused calls never
	// reached the proxy.
	sent, refused uint64
	// writes are the apiserver's write requests for the Queue controller's
	// resources; changed is how many Queues and ConfigMaps got a new
	// resourceVersion.
	writes  map[string]float64
	changed int
	// cpu is what the machine (anyone on it), moto and this process used.
	cpu usage
}

func between(a, z snapshot) window {
	w := window{
		from: a.at, to: z.at, calls: map[string]int{}, total: z.total - a.total,
		sent: z.limiter.Sent - a.limiter.Sent, refused: z.limiter.Refused - a.limiter.Refused,
		writes: map[string]float64{},
	}
	for op, n := range z.calls {
		w.calls[op] = n - a.calls[op]
	}
	for res, n := range z.writes {
		if d := n - a.writes[res]; d != 0 {
			w.writes[res] = d
		}
	}
	for k, v := range z.versions {
		if a.versions[k] != v {
			w.changed++
		}
	}
	w.cpu = a.cpu.until(z.cpu)
	return w
}

func (w window) length() time.Duration { return w.to - w.from }

// otherCalls are the calls that are not part of an observe.
func (w window) otherCalls() int {
	return w.total - w.calls["GetQueueAttributes"] - w.calls["ListQueueTags"]
}

func (w window) k8sWrites() float64 {
	sum := 0.0
	for _, n := range w.writes {
		sum += n
	}
	return sum
}

// controllerResources are the resources whose writes count: the Queue
// controller writes Queues (the finalizer), their status, their ConfigMaps,
// and Events. The apiserver's own lease renewals are left out.
var controllerResources = map[string]bool{"queues": true, "queues/status": true, "configmaps": true, "events": true}

// apiserverWrites reads the apiserver's own count of write requests for the
// controller's resources, by resource: every write, even one that changed
// nothing, is counted where it is served.
func (r *rig) apiserverWrites() (map[string]float64, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(r.kube.Config)
	if err != nil {
		return nil, err
	}
	text, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(r.ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for res, n := range WritesByResource(string(text)) {
		if controllerResources[res] {
			out[res] = n
		}
	}
	return out, nil
}

// versions returns the resourceVersion of every Queue and ConfigMap in ns.
func (r *rig) versions(ns string) (map[string]string, error) {
	out := map[string]string{}
	var queues sqsv1alpha1.QueueList
	if err := r.kube.Client.List(r.ctx, &queues, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, q := range queues.Items {
		out["Queue/"+q.Name] = q.ResourceVersion
	}
	var cms corev1.ConfigMapList
	if err := r.kube.Client.List(r.ctx, &cms, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, cm := range cms.Items {
		out["ConfigMap/"+cm.Name] = cm.ResourceVersion
	}
	return out, nil
}

// cpuTimes are the machine's and moto's CPU clocks, in ticks of 1/100 s
// (USER_HZ, 100 on Linux), and this process's.
type cpuTimes struct {
	busy, total float64 // the machine, all cores
	moto        float64 // moto_server, user and system
	self        time.Duration
	load        float64 // the machine's 1-minute load average
	at          time.Time
}

// readCPU reads /proc. A field it cannot read stays zero: CPU figures only
// describe the conditions of the run, and are reported as missing then.
func readCPU(motoPid int) cpuTimes {
	c := cpuTimes{at: time.Now(), self: selfCPU()}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 0 {
			c.load, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseFloat(f, 64)
			c.total += v
			if i != 3 && i != 4 { // idle and iowait
				c.busy += v
			}
		}
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", motoPid)); err == nil {
		// The command may hold spaces: fields count from the last ')'.
		s := string(data)
		fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(fields) > 12 {
			utime, _ := strconv.ParseFloat(fields[11], 64)
			stime, _ := strconv.ParseFloat(fields[12], 64)
			c.moto = utime + stime
		}
	}
	return c
}

// selfCPU is the CPU time this process (the controller, the proxy, the
// sampler) has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// usage is the CPU that was used between two readings, in cores on
// average: by the machine (a share of all its cores), moto and this process.
type usage struct {
	busy, moto, self float64
	load             float64 // the load average at the end
}

func (c cpuTimes) until(z cpuTimes) usage {
	u := usage{load: z.load}
	if dt := z.total - c.total; dt > 0 {
		u.busy = (z.busy - c.busy) / dt
	}
	if secs := z.at.Sub(c.at).Seconds(); secs > 0 {
		u.moto = (z.moto - c.moto) / 100 / secs
		u.self = (z.self - c.self).Seconds() / secs
	}
	return u
}

// motoRSS returns moto_server's resident memory in MiB, or 0 when /proc
// cannot tell.
func motoRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// probeEvery is how often the repair measure lists moto's queues: the
// resolution of a repair time.
const probeEvery = 250 * time.Millisecond

// repair deletes the victims' SQS queues directly in moto, one every
// spread/len(victims) (out-of-band deletes come at any moment, not in step
// with the polls), and returns how long each took to exist again. A probe
// counts a queue as back only when it was sent after the queue's delete had
// returned, and a repair time ends when that probe's answer arrives, so a
// figure is never shorter than the truth. It fails the benchmark when a
// victim is not back within limit of its delete: that is a bug, not a slow
// figure.
func (r *rig) repair(b *testing.B, prefix string, victims []string, spread, limit time.Duration) []time.Duration {
	b.Helper()
	urls := make([]string, len(victims))
	for i, name := range victims {
		out, err := r.direct.GetQueueUrl(r.ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)})
		if err != nil {
			b.Fatalf("looking up the victim %s: %v", name, err)
		}
		urls[i] = awssdk.ToString(out.QueueUrl)
	}

	var mu sync.Mutex
	deleted := map[string]time.Time{}
	var deleteErr atomic.Pointer[error]
	go func() {
		for i, name := range victims {
			if _, err := r.direct.DeleteQueue(r.ctx, &sqs.DeleteQueueInput{QueueUrl: &urls[i]}); err != nil {
				err = fmt.Errorf("deleting %s out of band: %w", name, err)
				deleteErr.Store(&err)
				return
			}
			mu.Lock()
			deleted[name] = time.Now()
			mu.Unlock()
			time.Sleep(spread / time.Duration(len(victims)))
		}
	}()

	took := map[string]time.Duration{}
	lost, inARow := 0, 0
	for len(took) < len(victims) {
		time.Sleep(probeEvery)
		if p := deleteErr.Load(); p != nil {
			b.Fatal(*p)
		}
		sent := time.Now()
		present, err := r.listQueues(prefix)
		if motoRace(err) && inARow < maxLostProbes {
			// The probe is lost, not the repair: the next one is sent
			// later, so no figure gets shorter than the truth.
			lost++
			inARow++
			continue
		}
		if err != nil {
			b.Fatalf("listing moto's queues: %v", err)
		}
		inARow = 0
		answered := time.Now()
		mu.Lock()
		for name, at := range deleted {
			if _, done := took[name]; done || !at.Before(sent) {
				continue
			}
			switch {
			case present[name]:
				took[name] = answered.Sub(at)
			case answered.Sub(at) > limit:
				mu.Unlock()
				b.Fatalf("the SQS queue %s, deleted out of band, was not back %s later", name, limit)
			}
		}
		mu.Unlock()
	}
	if lost > 0 {
		b.Logf("repair: %d of the probes' ListQueues calls failed with moto's HTTP 500 (its ListQueues races its CreateQueue)", lost)
	}
	out := make([]time.Duration, 0, len(took))
	for _, d := range took {
		out = append(out, d)
	}
	return out
}

// maxLostProbes is how many probes in a row may fail with motoRace: 10 s
// without an answer is no longer a race.
const maxLostProbes = 40

// motoRace says whether err is moto's HTTP 500 to ListQueues. moto_server
// serves each request on a thread of its own, and its ListQueues iterates
// over the region's dict of queues while a CreateQueue (a repair) may add
// to it: Python then raises "dictionary changed size during iteration",
// which moto answers with a 500 and an HTML page.
func motoRace(err error) bool {
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusInternalServerError
}

// listQueues returns the names of moto's queues that start with prefix.
func (r *rig) listQueues(prefix string) (map[string]bool, error) {
	names := map[string]bool{}
	in := &sqs.ListQueuesInput{QueueNamePrefix: &prefix, MaxResults: awssdk.Int32(1000)}
	for {
		out, err := r.direct.ListQueues(r.ctx, in)
		if err != nil {
			return nil, err
		}
		for _, u := range out.QueueUrls {
			names[path.Base(u)] = true
		}
		if out.NextToken == nil {
			return names, nil
		}
		in.NextToken = out.NextToken
	}
}

// motoCeiling returns how many observe calls (GetQueueAttributes and
// ListQueueTags, alternately) per second moto serves through the proxy to
// each number of concurrent callers, each pressing for d.
func (r *rig) motoCeiling(b *testing.B, urls []string, callers []int, d time.Duration) map[int]float64 {
	b.Helper()
	api := r.sqsClient(b, r.proxy.URL(), unlimited(b))
	out := map[int]float64{}
	for _, n := range callers {
		var calls atomic.Int64
		var failed atomic.Pointer[error]
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := range n {
			wg.Go(func() {
				for i := w; time.Now().Before(end); i += n {
					u := urls[i%len(urls)]
					var err error
					if i%2 == 0 {
						_, err = api.GetQueueAttributes(r.ctx, &sqs.GetQueueAttributesInput{
							QueueUrl: &u, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
						})
					} else {
						_, err = api.ListQueueTags(r.ctx, &sqs.ListQueueTagsInput{QueueUrl: &u})
					}
					if err != nil {
						failed.Store(&err)
						return
					}
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		if p := failed.Load(); p != nil {
			b.Fatalf("measuring moto's ceiling: %v", *p)
		}
		out[n] = float64(calls.Load()) / d.Seconds()
	}
	return out
}
