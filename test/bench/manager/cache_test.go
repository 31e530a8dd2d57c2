package manager

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/controller/etcdbackup"
	"github.com/tend-dev/tend/internal/controller/etcdcluster"
	"github.com/tend-dev/tend/internal/controller/podset"
	"github.com/tend-dev/tend/internal/controller/queue"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testenv"
)

// The benchmark's size; the defaults are the issue's.
var (
	flagSecrets    = flag.Int("cache.secrets", 2000, "unrelated Secrets (not Tend's) in the cluster")
	flagConfigMaps = flag.Int("cache.configmaps", 500, "unrelated ConfigMaps (not Tend's) in the cluster")
	flagSize       = flag.Int("cache.size", 4096, "bytes of data in each unrelated Secret and ConfigMap")
	flagNamespaces = flag.Int("cache.namespaces", 20, "namespaces the unrelated objects are spread over")
	flagSamples    = flag.Int("cache.samples", 3, "measurements of each cache")
)

// Tend's own objects: the Secrets and connection ConfigMap of a few
// EtcdClusters in Auto TLS mode with auth, and the ConfigMaps of a few
// Queues, labelled as their controllers label them.
const (
	tendClusters = 3
	tendQueues   = 2
)

// setup is one way to build the manager's cache, and the informers that
// the controllers' watches ask it for.
type setup struct {
	name     string
	opts     cache.Options
	newCache cache.NewCacheFunc
	// watches are the informers' objects; a metav1.PartialObjectMetadata
	// is a metadata-only watch.
	watches []client.Object
}

// before is the manager's cache as it was before issue 14: only pods
// (podset) and volume claims (etcdcluster) narrowed, and every Secret and
// ConfigMap held whole, since the controllers watched them typed.
func before() setup {
	return setup{
		name: "before: every Secret and ConfigMap",
		opts: cache.Options{
			Scheme:           scheme.Scheme,
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:                   podset.PodCache(),
				&corev1.PersistentVolumeClaim{}: etcdcluster.PVCCache(),
			},
		},
		newCache: cache.New,
		watches:  []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
	}
}

// after is the manager's cache as `tend manager` builds it now, from every
// controller's declarations: the Secrets and ConfigMaps are watched typed
// (Owns) and the Secrets also metadata-only (the users' Secrets).
func after(b *testing.B) setup {
	b.Helper()
	opts, newCache, err := manager.CacheFor(allControllers())
	if err != nil {
		b.Fatalf("the manager's cache options: %v", err)
	}
	return setup{
		name:     "after: Tend's Secrets and ConfigMaps, every Secret's metadata",
		opts:     opts,
		newCache: newCache,
		watches:  []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, secretMetadata()},
	}
}

// allControllers is every controller, with its default options, as
// `tend manager` registers them.
func allControllers() []manager.Controller {
	podsetOpts, queueOpts := podset.DefaultOptions(), queue.DefaultOptions()
	etcdOpts, backupOpts := etcdcluster.DefaultOptions(), etcdbackup.DefaultOptions()
	return append([]manager.Controller{
		podset.Controller(&podsetOpts),
		queue.Controller(&queueOpts),
		etcdcluster.Controller(&etcdOpts),
	}, etcdbackup.Controllers(&backupOpts)...)
}

func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// sample is one measurement of one cache.
type sample struct {
	// heapInUse and heapAlloc are the growth of the heap while the cache
	// was built and synced, after a full GC, in bytes.
	heapInUse, heapAlloc float64
	// What the cache held: whole Secrets (and of them, not Tend's),
	// Secrets' metadata (-1: no such informer), whole ConfigMaps.
	secrets, foreignSecrets, secretMetadata, configMaps int
}

func BenchmarkCache(b *testing.B) {
	once.Do(func() { result = run(b) })
	if b.Failed() || result == nil {
		return
	}
	for _, r := range result {
		b.ReportMetric(r.inUse.median/(1<<20), strings.SplitN(r.name, ":", 2)[0]+"-MiB")
	}
	b.ReportMetric(result[1].inUse.median/result[0].inUse.median, "after/before")
}

// controller-runtime's and the apiserver's start are once per process,
// whatever -benchtime says.
var (
	once   sync.Once
	result []figures
)

// figures are one cache's samples, summed up.
type figures struct {
	name         string
	inUse, alloc spread
	last         sample
	samples      int
}

func run(b *testing.B) []figures {
	// controller-runtime's informational lines would bury the table.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.WarnLevel)))
	env := testenv.New()
	if err := env.Start(); err != nil {
		b.Fatalf("starting the apiserver: %v", err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Errorf("%v", err)
		}
	})
	ctx := context.Background()
	tendSecrets, tendConfigMaps := populate(b, ctx, env.Client)

	setups := []setup{before(), after(b)}
	inUse := make([][]float64, len(setups))
	alloc := make([][]float64, len(setups))
	last := make([]sample, len(setups))
	for _, isAfter := range order(*flagSamples) {
		i := 0
		if isAfter {
			i = 1
		}
		s, err := measure(ctx, env.Config, setups[i])
		if err != nil {
			b.Fatalf("measuring the cache %q: %v", setups[i].name, err)
		}
		if isAfter && s.foreignSecrets > 0 {
			b.Errorf("the new cache holds %d Secrets that are not Tend's", s.foreignSecrets)
		}
		inUse[i] = append(inUse[i], s.heapInUse)
		alloc[i] = append(alloc[i], s.heapAlloc)
		last[i] = s
	}
	out := make([]figures, len(setups))
	for i, s := range setups {
		out[i] = figures{name: s.name, inUse: spreadOf(inUse[i]), alloc: spreadOf(alloc[i]), last: last[i], samples: len(inUse[i])}
	}
	fmt.Print(table(out, tendSecrets, tendConfigMaps))
	return out
}

// table is the figures as a Markdown table.
func table(fs []figures, tendSecrets, tendConfigMaps int) string {
	mib := func(x float64) string { return fmt.Sprintf("%.2f", x/(1<<20)) }
	held := func(n int) string {
		if n < 0 {
			return "–"
		}
		return fmt.Sprint(n)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "\nThe manager's cache with %d unrelated Secrets and %d unrelated ConfigMaps of %d B over %d namespaces, "+
		"beside Tend's %d Secrets and %d ConfigMaps; %d samples each, heap after a full GC less the heap before the cache.\n\n",
		*flagSecrets, *flagConfigMaps, *flagSize, *flagNamespaces, tendSecrets, tendConfigMaps, *flagSamples)
	w.WriteString("| cache | heap in use, MiB: min / median / max | heap allocated, MiB: min / median / max | Secrets held | Secrets' metadata held | ConfigMaps held |\n")
	w.WriteString("|---|---|---|---|---|---|\n")
	for _, f := range fs {
		fmt.Fprintf(&w, "| %s | %s / %s / %s | %s / %s / %s | %d | %s | %d |\n", f.name,
			mib(f.inUse.min), mib(f.inUse.median), mib(f.inUse.max),
			mib(f.alloc.min), mib(f.alloc.median), mib(f.alloc.max),
			f.last.secrets, held(f.last.secretMetadata), f.last.configMaps)
	}
	if len(fs) == 2 && fs[0].inUse.median > 0 && fs[0].alloc.median > 0 {
		fmt.Fprintf(&w, "| after ÷ before, medians | %.3f | %.3f | | | |\n",
			fs[1].inUse.median/fs[0].inUse.median, fs[1].alloc.median/fs[0].alloc.median)
	}
	w.WriteString("\n")
	return w.String()
}

// measure builds s's cache, syncs its informers, and reads what it holds
// and the heap it grew by; then it stops the cache.
func measure(ctx context.Context, cfg *rest.Config, s setup) (sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inUse0, alloc0 := heap()
	c, err := s.newCache(cfg, s.opts)
	if err != nil {
		return sample{}, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	for _, w := range s.watches {
		if _, err := c.GetInformer(ctx, w); err != nil {
			return sample{}, fmt.Errorf("the informer of %T: %w", w, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		return sample{}, fmt.Errorf("the cache did not sync")
	}
	out, err := held(ctx, c, s.watches)
	if err != nil {
		return sample{}, err
	}
	inUse1, alloc1 := heap()
	runtime.KeepAlive(c)
	out.heapInUse, out.heapAlloc = float64(inUse1)-float64(inUse0), float64(alloc1)-float64(alloc0)
	cancel()
	if err := <-done; err != nil {
		return sample{}, fmt.Errorf("stopping the cache: %w", err)
	}
	return out, nil
}

// held counts what c holds, in lists that are garbage once it returns.
func held(ctx context.Context, c cache.Cache, watches []client.Object) (sample, error) {
	out := sample{secretMetadata: -1}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets); err != nil {
		return out, err
	}
	out.secrets = len(secrets.Items)
	for _, s := range secrets.Items {
		if s.Labels[manager.LabelManagedBy] != manager.ManagedBy {
			out.foreignSecrets++
		}
	}
	var configMaps corev1.ConfigMapList
	if err := c.List(ctx, &configMaps); err != nil {
		return out, err
	}
	out.configMaps = len(configMaps.Items)
	for _, w := range watches {
		if _, ok := w.(*metav1.PartialObjectMetadata); !ok {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := c.List(ctx, list); err != nil {
			return out, err
		}
		out.secretMetadata = len(list.Items)
	}
	return out, nil
}

// heap returns the heap in use and allocated after a full GC.
func heap() (inUse, alloc uint64) {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.HeapAlloc
}

// populate writes the unrelated objects and Tend's, and returns how many
// Secrets and ConfigMaps of Tend's it wrote.
func populate(b *testing.B, ctx context.Context, c client.Client) (int, int) {
	b.Helper()
	rng := rand.New(rand.NewPCG(14, 2))
	data := func() []byte {
		buf := make([]byte, *flagSize)
		for i := range buf {
			buf[i] = byte(rng.UintN(256))
		}
		return buf
	}
	var objs []client.Object
	for i := range *flagNamespaces {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("users-%d", i)}})
	}
	if err := create(ctx, c, objs); err != nil {
		b.Fatalf("creating the namespaces: %v", err)
	}
	objs = objs[:0]
	for i := range *flagSecrets {
		objs = append(objs, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("users-%d", i%*flagNamespaces), Name: fmt.Sprintf("secret-%d", i),
				// Helm labels its release Secrets with this key too.
				Labels: map[string]string{manager.LabelManagedBy: "Helm"}},
			Data: map[string][]byte{"payload": data()},
		})
	}
	for i := range *flagConfigMaps {
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("users-%d", i%*flagNamespaces), Name: fmt.Sprintf("configmap-%d", i)},
			BinaryData: map[string][]byte{"payload": data()},
		})
	}
	var secrets, configMaps int
	for i := range tendClusters {
		ns, name := fmt.Sprintf("users-%d", i%*flagNamespaces), fmt.Sprintf("etcd-%d", i)
		labels := map[string]string{
			"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name,
			manager.LabelManagedBy: manager.ManagedBy, etcdcluster.LabelCluster: name,
		}
		for _, s := range []string{"-ca", "-server-tls", "-peer-tls", "-client-tls", "-root"} {
			objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + s, Labels: labels},
				Data: map[string][]byte{"tls.crt": data()[:1200], "tls.key": data()[:300], "ca.crt": data()[:1200]}})
			secrets++
		}
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-connection", Labels: labels},
			Data: map[string]string{"endpoint": "https://" + name + "-client:2379"}})
		configMaps++
	}
	for i := range tendQueues {
		ns, name := fmt.Sprintf("users-%d", i%*flagNamespaces), fmt.Sprintf("queue-%d", i)
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-queue",
				Labels: map[string]string{manager.LabelManagedBy: manager.ManagedBy, "sqs.tend.dev/queue": name}},
			Data: map[string]string{"queueURL": "http://127.0.0.1/000000000000/" + name}})
		configMaps++
	}
	if err := create(ctx, c, objs); err != nil {
		b.Fatalf("creating the objects: %v", err)
	}
	return secrets, configMaps
}

// create writes objs, 16 at a time, and returns the first error.
func create(ctx context.Context, c client.Client, objs []client.Object) error {
	work := make(chan client.Object)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for obj := range work {
				if err := c.Create(ctx, obj); err != nil {
					errs <- fmt.Errorf("creating %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
				}
			}
		})
	}
	for _, obj := range objs {
		work <- obj
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}
