package manager_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"

	"github.com/tend-dev/tend/internal/controller/etcdbackup"
	"github.com/tend-dev/tend/internal/controller/etcdcluster"
	"github.com/tend-dev/tend/internal/controller/podset"
	"github.com/tend-dev/tend/internal/controller/queue"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

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

// TestCacheHoldsTendsObjectsOnly runs a manager of every controller on a
// real apiserver, and checks that its cache holds the Secrets and
// ConfigMaps that Tend made (labelled app.kubernetes.io/managed-by=tend)
// and not a user's, whose metadata alone it holds, so that a change to a
// Secret that a Queue or an EtcdCluster names still starts a pass. The
// manager watches one namespace (--watch-namespaces): a PodSet in another
// is neither cached nor reconciled. (One manager per test binary: two
// would register the same controller names.)
func TestCacheHoldsTendsObjectsOnly(t *testing.T) {
	g := NewWithT(t)
	env := testenv.New()
	g.Expect(env.Start()).To(Succeed())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ns, other := env.Namespace(t), env.Namespace(t)
	opts := env.ManagerOptions()
	opts.WatchNamespaces = []string{ns}
	mgr, err := manager.New(env.Config, opts, allControllers())
	g.Expect(err).NotTo(HaveOccurred())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		g.Expect(<-done).To(Succeed())
	})
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	tends := map[string]string{"app.kubernetes.io/managed-by": "tend", "etcd.tend.dev/cluster": "demo"}
	// The user's objects first: the cache sees a kind's objects in the
	// order they were written, so once it shows Tend's, it would show the
	// user's too if it held them.
	users := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users",
			// kubectl apply copies the whole object, data and all, here.
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`}},
			Data: map[string][]byte{"password": []byte("secret")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"}, Data: map[string]string{"k": "v"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	own := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tends", Labels: tends}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tends", Labels: tends}, Data: map[string]string{"k": "v"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tends", Labels: tends}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	for _, obj := range append(users, own...) {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}

	cached := mgr.GetCache()
	g.Eventually(func() error {
		return cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tends"}, &corev1.Secret{})
	}).Should(Succeed(), "Tend's Secret is cached")
	g.Eventually(func() error {
		return cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tends"}, &corev1.ConfigMap{})
	}).Should(Succeed(), "Tend's ConfigMap is cached")
	g.Eventually(func() error {
		return cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tends"}, &corev1.Service{})
	}).Should(Succeed(), "Tend's Service is cached")
	err = cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &corev1.Service{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the user's Service is not cached: %v", err)
	err = cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the user's Secret is not cached: %v", err)
	err = cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the user's ConfigMap is not cached: %v", err)

	var secrets corev1.SecretList
	g.Expect(cached.List(ctx, &secrets, client.InNamespace(ns))).To(Succeed())
	g.Expect(secrets.Items).To(HaveLen(1))
	g.Expect(secrets.Items[0].Name).To(Equal("tends"))

	// The metadata of every Secret, for the watches of the Secrets that
	// users name, without kubectl's copy of the data.
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	g.Eventually(func() error {
		return cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, meta)
	}).Should(Succeed(), "the user's Secret's metadata is cached")
	g.Expect(meta.Annotations).NotTo(HaveKey(corev1.LastAppliedConfigAnnotation))

	// Reads through the manager's client answer as they did when the cache
	// held every object.
	rt := manager.ReadThrough(mgr.GetClient(), mgr.GetAPIReader(), &corev1.Secret{})
	secret := &corev1.Secret{}
	g.Expect(rt.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, secret)).To(Succeed())
	g.Expect(secret.Data).To(HaveKeyWithValue("password", []byte("secret")))
	err = rt.Get(ctx, client.ObjectKey{Namespace: ns, Name: "none"}, secret)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a Secret that does not exist: %v", err)
	err = rt.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a kind it is not asked to read through: %v", err)

	watchedNamespaceOnly(t, env, mgr.GetCache(), ns, other)
}

// watchedNamespaceOnly checks that a manager limited to the namespace
// watched reconciles a PodSet there and ignores one in other.
func watchedNamespaceOnly(t *testing.T, env *testenv.Env, cached client.Reader, watched, other string) {
	g := NewWithT(t)
	ctx := t.Context()
	podSet := func(ns string) *appsv1alpha1.PodSet {
		return &appsv1alpha1.PodSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1alpha1.PodSetSpec{
				Replicas: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "sleep", Image: "docker.io/library/busybox:1.35.0", Command: []string{"sleep", "3600"},
					}}},
				},
			},
		}
	}
	// The other namespace's first, so that once the watched one's is
	// reconciled, the other's would have been too if it were watched.
	g.Expect(env.Client.Create(ctx, podSet(other))).To(Succeed())
	g.Expect(env.Client.Create(ctx, podSet(watched))).To(Succeed())

	g.Eventually(func(g Gomega) {
		ps := &appsv1alpha1.PodSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: watched, Name: "web"}, ps)).To(Succeed())
		g.Expect(ps.Status.ObservedGeneration).To(Equal(ps.Generation))
	}).WithTimeout(30*time.Second).Should(Succeed(), "the watched namespace's PodSet is reconciled")
	var pods corev1.PodList
	g.Expect(env.Client.List(ctx, &pods, client.InNamespace(watched), client.MatchingLabels{"app": "web"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))

	g.Expect(cached.Get(ctx, client.ObjectKey{Namespace: other, Name: "web"}, &appsv1alpha1.PodSet{})).
		NotTo(Succeed(), "the other namespace is not cached")
	ps := &appsv1alpha1.PodSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: "web"}, ps)).To(Succeed())
	g.Expect(ps.Status.ObservedGeneration).To(BeZero(), "the other namespace's PodSet is not reconciled")
	g.Expect(env.Client.List(ctx, &pods, client.InNamespace(other))).To(Succeed())
	g.Expect(pods.Items).To(BeEmpty())
}
