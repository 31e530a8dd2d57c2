//go:build e2e

package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/etcdnames"
	"github.com/tend-dev/tend/internal/podspec"
)

// B9's source: one EtcdCluster of one member, made by the deployed
// manager, that the benchmark fills from this machine, and a bucket in
// moto for its backups.
const (
	b9Cluster = "b9"
	// b9Storage holds a database of a gigabyte and more: etcd's quota is
	// set to b9Quota (by default it would be three quarters of the
	// volume, but at most etcd's 2 GiB).
	b9Storage = "4Gi"
	b9Quota   = "3Gi"
	// b9CredsSecret holds moto's fake credentials, for the restore Jobs.
	b9CredsSecret = "s3-creds"
	// b9Region is moto's.
	b9Region = "us-east-1"
)

// How the benchmark fills the source: values of b9ValueSize bytes, half
// random (incompressible) and half text like Kubernetes' JSON objects
// (compressible), written in transactions of b9PutsPerTxn puts (under
// etcd's 1.5 MiB request limit) by b9Writers writers at once.
const (
	b9ValueSize  = 32 << 10
	b9PutsPerTxn = 24
	b9Writers    = 4
	b9KeyPrefix  = "/registry/b9/"
)

// b9Source is the filled cluster and where its backups go.
type b9Source struct {
	ns   string
	pods *b9Pods
	s3c  *s3.Client
	cli  *clientv3.Client
	// endpoint is the member's client URL as this machine's client names
	// it (mapped to the pod's IP).
	endpoint string
	// written is how many bytes of values the benchmark has put so far.
	written int64
	// keys counts the keys put so far, to name the next ones.
	keys int64
}

// b9StartSource creates the bucket, the credentials Secret and the source
// cluster in ns, and waits until the cluster is Available.
func (r *rig) b9StartSource(b *testing.B, ns string) *b9Source {
	b.Helper()
	ctx := b.Context()
	c := r.cluster.Client
	s := &b9Source{ns: ns}
	bucket := "b9-" + ns[len(ns)-5:]
	s.s3c = s3.New(s3.Options{
		Region:       b9Region,
		BaseEndpoint: awssdk.String(r.cluster.Settings.MotoURL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	if _, err := s.s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		b.Fatalf("creating the bucket %s in moto (%s): %v", bucket, r.cluster.Settings.MotoURL, err)
	}
	b.Cleanup(func() { s.emptyBucket(b, bucket) })
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b9CredsSecret},
		StringData: map[string]string{podspec.EnvAccessKeyID: "test", podspec.EnvSecretAccessKey: "test"},
	}
	if err := c.Create(ctx, creds); err != nil {
		b.Fatalf("creating the Secret %s: %v", creds.Name, err)
	}

	ec := b9NewCluster(ns, b9Cluster, 1, r.cluster.Settings.EtcdVersion)
	start := time.Now()
	if err := c.Create(ctx, ec); err != nil {
		b.Fatalf("creating the EtcdCluster %s: %v", ec.Name, err)
	}
	var conn corev1.ConfigMap
	var pod corev1.Pod
	r.cluster.WaitFor(b, *flagB9Timeout, "the source EtcdCluster "+ec.Name+" Available, with its connection ConfigMap", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return false, err
		}
		if !available(&ec.Status) {
			return false, fmt.Errorf("status: %+v", ec.Status.Conditions)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: etcdnames.ConnectionName(ec)}, &conn); err != nil {
			return false, err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ec.Name + "-0"}, &pod); err != nil {
			return false, err
		}
		return pod.Status.PodIP != "", nil
	})
	b9Logf(b, "B9: the source cluster %s/%s is Available after %.1f s", ns, ec.Name, time.Since(start).Seconds())

	s.endpoint = strings.Split(conn.Data[podspec.ConnectionEndpoints], ",")[0]
	s.pods = &b9Pods{
		ns: ns, tendImage: r.cluster.Settings.TendImage, etcdImage: r.cluster.Settings.EtcdImage,
		cluster: ec.Name, member: s.endpoint,
		connection: etcdnames.ConnectionName(ec), clientTLS: etcdnames.ClientTLSSecret(ec),
		s3: b9S3{endpoint: r.cluster.Settings.MotoURL, region: b9Region, bucket: bucket},
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s.endpoint, "https://"), ":2379")
	tlsConfig := r.cluster.SecretTLS(b, ns, etcdnames.ClientTLSSecret(ec))
	s.cli = r.cluster.EtcdClient(b, tlsConfig, map[string]string{host: pod.Status.PodIP}, s.endpoint)
	return s
}

// b9NewCluster is an EtcdCluster of B9: storage for a database of a
// gigabyte and more, and no final snapshot on deletion.
func b9NewCluster(ns, name string, members int32, version string) *etcdv1alpha1.EtcdCluster {
	size, quota := resource.MustParse(b9Storage), resource.MustParse(b9Quota)
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To(members),
			Version:        version,
			Storage:        etcdv1alpha1.Storage{Size: &size},
			Options:        etcdv1alpha1.Options{QuotaBackendBytes: &quota},
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
		},
	}
}

// fillTo puts values until the benchmark has written target bytes of
// them in all, and returns the member's database size.
func (s *b9Source) fillTo(b *testing.B, target int64) int64 {
	b.Helper()
	start, before := time.Now(), s.written
	if need := target - s.written; need > 0 {
		ctx, cancel := context.WithTimeout(b.Context(), *flagB9Timeout)
		defer cancel()
		var (
			wg       sync.WaitGroup
			written  atomic.Int64
			next     atomic.Int64
			mu       sync.Mutex
			firstErr error
		)
		next.Store(s.keys)
		for w := range b9Writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.NewChaCha8([32]byte{byte(w), byte(s.keys), byte(s.keys >> 8), byte(s.keys >> 16)})
				for written.Load() < need && ctx.Err() == nil {
					ops := make([]clientv3.Op, 0, b9PutsPerTxn)
					for range b9PutsPerTxn {
						i := next.Add(1) - 1
						ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%08d", b9KeyPrefix, i), b9Value(rnd, i)))
					}
					callCtx, callCancel := context.WithTimeout(ctx, 30*time.Second)
					_, err := s.cli.Txn(callCtx).Then(ops...).Commit()
					callCancel()
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						cancel()
						return
					}
					written.Add(b9PutsPerTxn * b9ValueSize)
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			b.Fatalf("filling the source cluster: %v", firstErr)
		}
		if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
			b.Fatalf("filling the source cluster: not done within %s (-b9.timeout)", *flagB9Timeout)
		}
		s.written += written.Load()
		s.keys = next.Load()
	}
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	st, err := s.cli.Status(ctx, s.endpoint)
	if err != nil {
		b.Fatalf("reading the member's status: %v", err)
	}
	took := time.Since(start).Seconds()
	b9Logf(b, "B9: filled the source with %.0f MB of values in all (%.0f MB now, %.1f MB/s); %d keys; database %.0f MB, revision %d",
		float64(s.written)/1e6, float64(s.written-before)/1e6, mbPerSecond(s.written-before, took), s.keys, float64(st.DbSize)/1e6, st.Header.Revision)
	return st.DbSize
}

// b9Text is text like the JSON of Kubernetes objects, from which each
// value takes its compressible half.
var b9Text = func() string {
	var sb strings.Builder
	for i := 0; sb.Len() < 4*b9ValueSize; i++ {
		fmt.Fprintf(&sb, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-%d","namespace":"shop-%d","uid":"%08x-7d2c-4c1e-9a55-%012x",`+
			`"resourceVersion":"%d","labels":{"app":"web","tier":"frontend","pod-template-hash":"%x"}},"spec":{"containers":[{"name":"web",`+
			`"image":"registry.example.com/shop/web:v1.%d.%d","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"requests":`+
			`{"cpu":"%dm","memory":"%dMi"}}}],"nodeName":"node-%d"},"status":{"phase":"Running","podIP":"10.%d.%d.%d"}}`+"\n",
			i, i%17, i*7919, i*104729, 100000+i, i*31, i%9, i%23, 100+i%400, 64+i%512, i%50, i%250, (i/7)%250, (i/3)%250)
	}
	return sb.String()
}()

// b9Value is the value of the i-th key: b9ValueSize bytes, half from rnd,
// half text.
func b9Value(rnd *rand.ChaCha8, i int64) string {
	v := make([]byte, b9ValueSize)
	_, _ = rnd.Read(v[:b9ValueSize/2])
	off := int(i*997) % (len(b9Text) - b9ValueSize/2)
	copy(v[b9ValueSize/2:], b9Text[off:])
	return string(v)
}

// emptyBucket deletes every object of bucket, then the bucket, so that
// moto does not keep gigabytes after the run.
func (s *b9Source) emptyBucket(b *testing.B, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(s.s3c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			b9Logf(b, "B9: listing the bucket %s to empty it: %v", bucket, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := s.s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key}); err != nil {
				b9Logf(b, "B9: deleting %s/%s: %v", bucket, *o.Key, err)
			}
		}
	}
	if _, err := s.s3c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket}); err != nil {
		b9Logf(b, "B9: deleting the bucket %s: %v", bucket, err)
	}
}

// deleteObject deletes one backup's object once it has been measured.
func (s *b9Source) deleteObject(b *testing.B, key string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.pods.s3.bucket, Key: &key}); err != nil {
		b.Fatalf("deleting the object %s: %v", key, err)
	}
}

// motoCeiling uploads size random bytes to key from this machine, as tend
// backup uploads (a multipart upload with the agent's part size and
// concurrency), downloads them, deletes them, and returns both rates in
// MB/s: what moto can take and give on this node, with no etcd in the way.
func (s *b9Source) motoCeiling(b *testing.B, key string, size int64) (up, down float64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), *flagB9Timeout)
	defer cancel()
	bucket := s.pods.s3.bucket
	rnd := rand.NewChaCha8([32]byte{9})
	// The agent's uploader, as the agent uses it (internal/agent says why
	// it stays on the deprecated package).
	//nolint:staticcheck // SA1019, as in internal/agent.
	uploader := manager.NewUploader(s.s3c, func(u *manager.Uploader) {
		u.PartSize, u.Concurrency = agent.DefaultPartSize, agent.DefaultConcurrency
	})
	start := time.Now()
	if _, err := uploader.Upload(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: io.LimitReader(rnd, size)}); err != nil { //nolint:staticcheck // SA1019, as NewUploader.
		b.Fatalf("uploading %d bytes to moto: %v", size, err)
	}
	up = mbPerSecond(size, time.Since(start).Seconds())
	start = time.Now()
	out, err := s.s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		b.Fatalf("downloading %s from moto: %v", key, err)
	}
	n, err := io.Copy(io.Discard, out.Body)
	_ = out.Body.Close()
	if err != nil || n != size {
		b.Fatalf("downloading %s from moto: %d bytes of %d: %v", key, n, size, err)
	}
	down = mbPerSecond(size, time.Since(start).Seconds())
	s.deleteObject(b, key)
	return up, down
}
