//go:build e2e

package etcd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// B12's settings. Pass them after -args when running this package alone.
var (
	flagB12Samples = flag.Int("b12.samples", 3, "B12: samples of each figure (at least 3 for a median)")
	flagB12Size    = flag.Int64("b12.size", 256<<20,
		"B12: bytes written before each defragmentation, half of them history; each sample writes them to three members on the node's one disk")
	flagB12Quota   = flag.Int64("b12.quota", 64<<20, "B12: spec.options.quotaBackendBytes of the NOSPACE cluster")
	flagB12Timeout = flag.Duration("b12.timeout", 10*time.Minute, "B12: the longest wait for one step")
	flagB12Migrate = flag.Int64("b12.migrate-size", 64<<20, "B12: bytes written before a volume migration (its members catch up by snapshot)")
)

const (
	b12Name    = "b12"
	b12Members = 3
	b12Tend    = "tend"
	b12Anchor  = "anchor"
	b12NoSpace = "nospace"
	b12Migrate = "migrate"
	// b12Settle is how long the writer runs before and after a
	// defragmentation, so that a gap at either end is seen.
	b12Settle = 3 * time.Second
)

// BenchmarkB12 measures the storage maintenance of a 3-member EtcdCluster
// on the local cluster. Each sample is a new cluster in a namespace of its
// own, with Tend's own compaction and defragmentation off, filled with
// -b12.size bytes over the same keys twice and compacted, so that half of
// each member's database is free pages, under a steady writer:
//
//   - tend: kubectl tend defrag's annotation, to the round's completion
//     in status (followers first, the leader last after one MoveLeader);
//   - anchor: what etcdctl defrag --cluster does, from this machine: each
//     member of the member list in turn, the leader wherever it falls;
//   - nospace: a cluster with a -b12.quota quota, noSpace Auto, is filled
//     until etcd refuses a write with NOSPACE; the figure runs to the first
//     write it accepts again. Tend notices at its next look at the
//     cluster (the health check, every 30 s): no Kubernetes event says
//     NOSPACE.
//   - migrate: a cluster on local-path with -b12.migrate-size bytes is
//     moved to the class local-path-b, one member at a time; the figure
//     runs from the spec change to status.maintenance.volumeMigration
//     Completed, its backup first.
//
// Elections are the raft term's rise less the leadership moves Tend made
// on purpose (LeaderMoved Events); the write gap is the longest time
// without an acknowledged write from the request to the end.
func BenchmarkB12(b *testing.B) {
	if *flagB12Samples < 1 || *flagB12Size < 1<<20 {
		b.Fatal("-b12.samples must be at least 1 and -b12.size at least 1 MiB")
	}
	start := time.Now()
	r := getRig(b)
	f := &b12Figures{size: *flagB12Size, quota: *flagB12Quota, migrateSize: *flagB12Migrate}
	measureOnce(b, "maintenance", func(b *testing.B) {
		r.setManagerArgs(b, r.baseArgs)
		for round := range *flagB12Samples {
			for _, v := range rotation([]string{b12Tend, b12Anchor, b12NoSpace, b12Migrate}, round) {
				syscall.Sync()
				switch v {
				case b12NoSpace:
					r.b12NoSpace(b, f)
				case b12Migrate:
					r.b12Migrate(b, f)
				default:
					r.b12Defrag(b, f, v)
				}
			}
		}
	}, f.metrics)
	f.took = time.Since(start)
	printTable(b, "B12, EtcdCluster storage maintenance on the local cluster (test/bench/etcd)", f.write)
}

// b12Logf logs to the benchmark and, at once, to standard error.
func b12Logf(b *testing.B, format string, args ...any) {
	b.Helper()
	logNow(b, "b12", format, args...)
}

// b12Cluster is a measured cluster: Tend compacts and defragments only
// when asked.
func b12Cluster(ns string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) *etcdv1alpha1.EtcdCluster {
	ec := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b12Name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](b12Members),
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
			Maintenance: etcdv1alpha1.Maintenance{
				Compaction:      &etcdv1alpha1.Compaction{Policy: etcdv1alpha1.CompactionDisabled},
				Defragmentation: &etcdv1alpha1.Defragmentation{Policy: etcdv1alpha1.DefragmentationDisabled},
			},
		},
	}
	mutate(&ec.Spec)
	return ec
}

// b12Start creates ec, waits until it settles, and returns a client of its
// Service, one per member (by name) and the hosts they resolve with.
func (r *rig) b12Start(b *testing.B, ec *etcdv1alpha1.EtcdCluster) (*clientv3.Client, map[string]*clientv3.Client) {
	b.Helper()
	if err := r.cluster.Client.Create(b.Context(), ec); err != nil {
		b.Fatalf("creating the EtcdCluster: %v", err)
	}
	r.cluster.WaitFor(b, *flagB12Timeout, "the EtcdCluster "+ec.Name+" to settle", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := r.cluster.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			return false, err
		}
		o := observation{generation: got.Generation, status: got.Status}
		if !stable(&o, b12Members, got.Generation) {
			return false, errors.New(summary(&o))
		}
		return true, nil
	})
	return r.b12Clients(b, ec)
}

// b12Clients returns a client of ec's Service, and one per member (by
// name), at the members' pod addresses now.
func (r *rig) b12Clients(b *testing.B, ec *etcdv1alpha1.EtcdCluster) (*clientv3.Client, map[string]*clientv3.Client) {
	b.Helper()
	tlsConfig := r.cluster.SecretTLS(b, ec.Namespace, ec.Name+"-client-tls")
	hosts, members, err := r.cluster.EtcdHosts(b.Context(), ec.Namespace, ec.Name)
	if err != nil {
		b.Fatal(err)
	}
	svc := r.cluster.EtcdClient(b, tlsConfig, hosts, framework.EtcdServiceEndpoint(ec.Namespace, ec.Name))
	each := map[string]*clientv3.Client{}
	for _, m := range members {
		each[m] = r.cluster.EtcdClient(b, tlsConfig, hosts, "https://"+framework.EtcdMemberHost(ec.Namespace, ec.Name, m)+":2379")
	}
	return svc, each
}

// b12Defrag takes one defragmentation sample of variant v.
func (r *rig) b12Defrag(b *testing.B, f *b12Figures, v string) {
	ns := r.cluster.Namespace(b)
	defer r.deleteNamespace(b, ns)
	size := *flagB12Size
	ec := b12Cluster(ns, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Storage.Size = resource.NewQuantity(4*size+(256<<20), resource.BinarySI)
		s.Options.QuotaBackendBytes = resource.NewQuantity(2*size+(256<<20), resource.BinarySI)
	})
	cli, each := r.b12Start(b, ec)
	rev := b12Fill(b, cli, size)
	ctx, cancel := context.WithTimeout(b.Context(), *flagB12Timeout)
	defer cancel()
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		b.Fatalf("compacting: %v", err)
	}
	w := framework.StartWriter(b, cli, "writer/")
	time.Sleep(b12Settle)
	termBefore, before := b12Terms(b, each)
	movesBefore := r.b12Moves(b, ns)

	start := time.Now()
	if v == b12Tend {
		r.b12TendRound(b, ec)
	} else {
		for _, name := range slices.Sorted(maps.Keys(each)) { // as etcdctl: each member in turn, the leader wherever it falls
			m := each[name]
			if _, err := m.Defragment(ctx, m.Endpoints()[0]); err != nil {
				b.Fatalf("defragmenting %s: %v", name, err)
			}
		}
	}
	end := time.Now()
	time.Sleep(b12Settle)
	gap := w.LongestGap(start, end.Add(b12Settle))
	_, _, _ = w.Stop()
	termAfter, after := b12Terms(b, each)
	elections := float64(termAfter-termBefore) - float64(r.b12Moves(b, ns)-movesBefore)
	b12Logf(b, "%s: %.1f s, longest write gap %.2f s, raft term %d → %d, %d MB → %d MB", v, end.Sub(start).Seconds(), gap.Seconds(),
		termBefore, termAfter, before/1e6, after/1e6)
	if v == b12Tend {
		f.tendElections, f.tendGap = append(f.tendElections, elections), append(f.tendGap, gap.Seconds())
		f.tendTotal, f.tendBeforeMB, f.tendAfterMB = append(f.tendTotal, end.Sub(start).Seconds()), append(f.tendBeforeMB, float64(before)/1e6), append(f.tendAfterMB, float64(after)/1e6)
		return
	}
	f.anchorElections, f.anchorGap = append(f.anchorElections, elections), append(f.anchorGap, gap.Seconds())
	f.anchorTotal, f.anchorBeforeMB, f.anchorAfterMB = append(f.anchorTotal, end.Sub(start).Seconds()), append(f.anchorBeforeMB, float64(before)/1e6), append(f.anchorAfterMB, float64(after)/1e6)
}

// b12TendRound asks Tend for a round, as kubectl tend defrag does, and
// waits until status says it completed.
func (r *rig) b12TendRound(b *testing.B, ec *etcdv1alpha1.EtcdCluster) {
	b.Helper()
	request := time.Now().UTC().Format(time.RFC3339Nano)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, etcdv1alpha1.AnnotationDefragment, request)
	if err := r.cluster.Client.Patch(b.Context(), ec.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatal(err)
	}
	r.cluster.WaitFor(b, *flagB12Timeout, "Tend's defragmentation round", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := r.cluster.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			return false, err
		}
		m := got.Status.Maintenance
		if m == nil || m.Defragmentation == nil || m.Defragmentation.Request != request {
			return false, errors.New("no round for the request yet")
		}
		switch d := m.Defragmentation; d.Phase {
		case etcdv1alpha1.DefragmentationStalled:
			return false, framework.Stop(errors.New(d.Message))
		case etcdv1alpha1.DefragmentationCompleted:
			return true, nil
		}
		return false, fmt.Errorf("%d of %d members done", len(m.Defragmentation.Results), len(m.Defragmentation.Members))
	})
}

// b12Moves counts Tend's LeaderMoved Events in ns.
func (r *rig) b12Moves(b *testing.B, ns string) int {
	b.Helper()
	var list corev1.EventList
	if err := r.cluster.Client.List(b.Context(), &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == "LeaderMoved" {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// b12Terms is the highest raft term the members report, and their
// databases summed.
func b12Terms(b *testing.B, each map[string]*clientv3.Client) (uint64, int64) {
	b.Helper()
	var term uint64
	var size int64
	for name, m := range each {
		ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
		st, err := m.Status(ctx, m.Endpoints()[0])
		cancel()
		if err != nil {
			b.Fatalf("the status of %s: %v", name, err)
		}
		term, size = max(term, st.RaftTerm), size+st.DbSize
	}
	return term, size
}

// b12Fill writes size bytes of 64 KiB values over the same keys twice and
// returns the last revision.
func b12Fill(b *testing.B, cli *clientv3.Client, size int64) int64 {
	b.Helper()
	value := strings.Repeat("b", 64<<10)
	keys := int(size / 2 / int64(len(value)))
	var rev int64
	for round := range 2 {
		for k := range keys {
			ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
			resp, err := cli.Put(ctx, fmt.Sprintf("fill/%06d", k), value[round:])
			cancel()
			if err != nil {
				b.Fatalf("filling: %v", err)
			}
			rev = resp.Header.Revision
		}
	}
	return rev
}

// b12NoSpace takes one NOSPACE sample.
func (r *rig) b12NoSpace(b *testing.B, f *b12Figures) {
	ns := r.cluster.Namespace(b)
	defer r.deleteNamespace(b, ns)
	ec := b12Cluster(ns, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Options.QuotaBackendBytes = resource.NewQuantity(*flagB12Quota, resource.BinarySI)
		s.Maintenance.Compaction = nil // the default: an hour kept, so the recovery compacts to the current revision
		s.Maintenance.NoSpace = etcdv1alpha1.NoSpaceAuto
	})
	cli, _ := r.b12Start(b, ec)
	value := strings.Repeat("n", 64<<10)
	var refused time.Time
	for i := 0; refused.IsZero(); i++ {
		ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("full/%d", i%16), value)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			refused = time.Now()
		case err != nil:
			b.Fatalf("filling: %v", err)
		}
	}
	var accepted time.Time
	r.cluster.WaitFor(b, *flagB12Timeout, "a write accepted after NOSPACE", func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, "after", "1"); err != nil {
			return false, err
		}
		accepted = time.Now()
		return true, nil
	})
	b12Logf(b, "nospace: writes accepted %.1f s after the refusal", accepted.Sub(refused).Seconds())
	f.noSpace = append(f.noSpace, accepted.Sub(refused).Seconds())
}

// b12Migrate takes one volume migration sample: a cluster on local-path
// moved to local-path-b under the writer.
func (r *rig) b12Migrate(b *testing.B, f *b12Figures) {
	ns := r.cluster.Namespace(b)
	defer r.deleteNamespace(b, ns)
	ec := b12Cluster(ns, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("local-path") })
	cli, each := r.b12Start(b, ec)
	b12Fill(b, cli, *flagB12Migrate)
	w := framework.StartWriter(b, cli, "writer/")
	time.Sleep(b12Settle)
	termBefore, _ := b12Terms(b, each)
	movesBefore := r.b12Moves(b, ns)

	start := time.Now()
	patch := []byte(`{"spec":{"storage":{"storageClassName":"local-path-b"}}}`)
	if err := r.cluster.Client.Patch(b.Context(), ec.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatal(err)
	}
	r.cluster.WaitFor(b, 2**flagB12Timeout, "the members moved to local-path-b", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := r.cluster.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			return false, err
		}
		m := got.Status.Maintenance
		if m == nil || m.VolumeMigration == nil || m.VolumeMigration.StorageClassName != "local-path-b" {
			return false, errors.New("no migration to local-path-b yet")
		}
		switch mig := m.VolumeMigration; mig.Phase {
		case etcdv1alpha1.MigrationBlocked:
			return false, framework.Stop(errors.New(mig.Message))
		case etcdv1alpha1.MigrationCompleted:
			return true, nil
		default:
			return false, fmt.Errorf("%s, %d to move: %s", mig.Phase, len(mig.Remaining), mig.Message)
		}
	})
	end := time.Now()
	time.Sleep(b12Settle)
	gap := w.LongestGap(start, end.Add(b12Settle))
	acked, _, _ := w.Stop()
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	resp, err := cli.Get(ctx, "writer/", clientv3.WithPrefix())
	if err != nil {
		b.Fatalf("reading the writes back: %v", err)
	}
	stored := map[string]string{}
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = string(kv.Value)
	}
	lost := framework.Lost(acked, stored)
	_, after := r.b12Clients(b, ec) // new pods, new addresses
	termAfter, _ := b12Terms(b, after)
	elections := float64(termAfter-termBefore) - float64(r.b12Moves(b, ns)-movesBefore)
	b12Logf(b, "migrate: %.1f s, longest write gap %.2f s, raft term %d → %d, %d of %d acknowledged writes lost",
		end.Sub(start).Seconds(), gap.Seconds(), termBefore, termAfter, len(lost), len(acked))
	f.migrateTotal, f.migrateGap = append(f.migrateTotal, end.Sub(start).Seconds()), append(f.migrateGap, gap.Seconds())
	f.migrateElections, f.migrateLost = append(f.migrateElections, elections), append(f.migrateLost, float64(len(lost)))
}
