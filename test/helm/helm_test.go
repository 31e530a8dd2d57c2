//go:build e2e

// Package helm installs Tend with its Helm chart (dist/chart) into the local
// cluster with the pinned Helm, as a user would: two releases side by side,
// the first over the Tend that the e2e framework deployed from
// config/local, each on namespaces of its own, and runs a sample in each.
// make test-helm runs it, with HELM set, after the e2e tests and alone: it
// replaces the cluster's operator while it runs, and deploys config/local
// again when it ends.
package helm

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	appsv1beta1 "github.com/tend-dev/tend/api/apps/v1beta1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

var cluster = framework.New()

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

// runHelm runs the pinned Helm on the local cluster and returns its output.
func runHelm(args ...string) (string, error) {
	path := os.Getenv("HELM")
	if path == "" {
		return "", errors.New("HELM is not set: run make test-helm, which builds the pinned Helm")
	}
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Dir = cluster.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Settings.Kubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// helm runs the pinned Helm and fails the test if it fails.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runHelm(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// release is one Helm release of the chart and what the test gives it.
type release struct {
	name, namespace string
	// watched is the one namespace whose objects its manager reconciles.
	watched string
	// prefix is its clusterScopedNamePrefix.
	prefix string
	values map[string]any
}

// clusterScoped are the names, less the prefix, of the cluster-scoped
// objects that a release installs besides the CRDs.
var clusterScoped = []struct {
	obj  client.Object
	name string
}{
	{&rbacv1.ClusterRole{}, "manager"},
	{&rbacv1.ClusterRole{}, "metrics-auth"},
	{&rbacv1.ClusterRole{}, "metrics-reader"},
	{&rbacv1.ClusterRoleBinding{}, "manager"},
	{&rbacv1.ClusterRoleBinding{}, "metrics-auth"},
}

// TestTwoReleasesOnDisjointNamespaces runs two Tends on one cluster, as
// docs/helm.md says to: release tend over config/local's Tend in
// tend-system, which installs the CRDs and serves their conversion, and
// release tend-b in a namespace of its own, with its own cluster-scoped
// names, no CRDs and no webhook. Each watches one namespace, where a
// sample PodSet runs. Each manager must hold its own Lease and be the
// only one that acts on its namespace's objects (the Events' reporting
// instance names the acting pod); the second must leave the CRDs as the
// first set them, and a PodSet in its namespace still reads as v1beta1
// through the first's webhook. Uninstalling tend-b removes its objects
// and nothing of tend's, whose manager goes on reconciling. Uninstalling
// tend keeps the CRDs and the samples. Then config/local is deployed
// again for what follows.
func TestTwoReleasesOnDisjointNamespaces(t *testing.T) {
	ctx := t.Context()
	began := time.Now()
	// cert is release tend's webhook certificate, which helm uninstall
	// deletes with its Secret.
	var cert *corev1.Secret
	t.Cleanup(func() {
		if cert == nil {
			cert = certSecret(t)
		}
		// A failed run leaves release tend behind; the next one would
		// uninstall it over config/local's objects.
		if _, err := runHelm("uninstall", "tend", "--namespace", framework.OperatorNamespace, "--ignore-not-found", "--wait", "--timeout", "3m"); err != nil {
			t.Error(err)
		}
		// config/local's manager takes the certificate over, as it would
		// have, had the Secret stayed: a new one would keep it unready
		// until the kubelet refreshes the Secret's volume, half a minute.
		if cert != nil {
			keep := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cert.Namespace, Name: cert.Name, Labels: cert.Labels}, Data: cert.Data}
			if err := cluster.Client.Create(context.Background(), keep); client.IgnoreAlreadyExists(err) != nil {
				t.Errorf("keeping the webhook certificate for config/local: %v", err)
			}
		}
		start := time.Now()
		t.Logf("deploying config/local again (at %s)", time.Since(began).Round(time.Second))
		cmd := exec.Command(filepath.Join(cluster.Root, "hack/cluster/deploy.sh"), "--local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("deploying config/local again after the Helm test: %v\n%s", err, out)
		}
		t.Logf("deploying config/local again took %s; the test, %s in all", time.Since(start).Round(time.Second), time.Since(began).Round(time.Second))
	})
	ref, err := exec.Command(filepath.Join(cluster.Root, "hack/cluster/images.sh"), "ref", "tend").Output()
	if err != nil {
		t.Fatalf("the tend image's reference: %v", err)
	}
	image := strings.TrimSpace(string(ref))
	repository, digest, ok := strings.Cut(image, "@")
	if !ok {
		t.Fatalf("the tend image's reference %q has no digest", ref)
	}
	// config/local's credentials Secret has a generated name: take it from
	// the manager it deployed, and copy it for the second release.
	deployed := &appsv1.Deployment{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: "tend-manager"}, deployed); err != nil {
		t.Fatal(err)
	}
	envFrom := deployed.Spec.Template.Spec.Containers[0].EnvFrom
	if len(envFrom) != 1 || envFrom[0].SecretRef == nil {
		t.Fatalf("config/local's manager has envFrom %v; want its credentials Secret", envFrom)
	}
	credentials := &corev1.Secret{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: envFrom[0].SecretRef.Name}, credentials); err != nil {
		t.Fatal(err)
	}

	// A release that a killed run left behind would refuse the name.
	helm(t, "uninstall", "tend", "--namespace", framework.OperatorNamespace, "--ignore-not-found", "--wait")
	a := &release{name: "tend", namespace: framework.OperatorNamespace, watched: cluster.Namespace(t), prefix: "tend-"}
	b := &release{name: "tend-b", namespace: cluster.Namespace(t), watched: cluster.Namespace(t), prefix: "tend-e2e-b-"}
	deleteLeftovers(t, b)
	if err := cluster.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.namespace, Name: "tend-aws"},
		Data:       credentials.Data,
	}); err != nil {
		t.Fatal(err)
	}
	// As config/local: moto for SQS, its fake credentials from a Secret.
	sqs := func(secret string) map[string]any {
		return map[string]any{"endpoint": cluster.Settings.MotoURL, "region": "us-east-1", "credentialsSecret": secret}
	}
	img := map[string]any{"repository": repository, "digest": digest}
	a.values = map[string]any{"image": img, "sqs": sqs(envFrom[0].SecretRef.Name), "watchNamespaces": []string{a.watched}}
	b.values = map[string]any{
		"image": img, "sqs": sqs("tend-aws"), "watchNamespaces": []string{b.watched},
		"clusterScopedNamePrefix": b.prefix,
		"crds":                    map[string]any{"install": false},
		"webhook":                 map[string]any{"enabled": false},
	}
	t.Cleanup(func() {
		if _, err := runHelm("uninstall", b.name, "--namespace", b.namespace, "--ignore-not-found", "--wait", "--timeout", "3m"); err != nil {
			t.Error(err)
		}
	})

	// The two installs go side by side; tend's takes over config/local's
	// objects, its fields included.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range []*release{a, b} {
		args := installArgs(t, r)
		wg.Go(func() { _, errs[i] = runHelm(args...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("the two helm install --wait took %s (at %s)", time.Since(start).Round(time.Second), time.Since(began).Round(time.Second))

	d := &appsv1.Deployment{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: a.namespace, Name: "tend-manager"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Annotations["meta.helm.sh/release-name"] != a.name {
		t.Errorf("the manager's Deployment is not the release's: annotations %v", d.Annotations)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("the manager runs %s, want the chart's value %s", got, image)
	}
	if d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas != 1 {
		t.Errorf("helm install --wait returned with the manager at generation %d of %d, %d available",
			d.Status.ObservedGeneration, d.Generation, d.Status.AvailableReplicas)
	}
	for _, r := range []*release{a, b} {
		if status := helm(t, "status", r.name, "--namespace", r.namespace); !strings.Contains(status, "STATUS: deployed") {
			t.Errorf("helm status %s:\n%s", r.name, status)
		}
		checkClusterScoped(t, r, true)
	}

	// Each manager leads through a Lease in its own namespace. Once the
	// release's new pod holds tend's, config/local's manager, which
	// watched every namespace, has stopped: it lets the Lease go only
	// then.
	holderA, holderB := leader(t, a), leader(t, b)
	t.Logf("leaders: %s/%s and %s/%s (at %s)", a.namespace, holderA, b.namespace, holderB, time.Since(began).Round(time.Second))

	sample, err := os.ReadFile(filepath.Join(cluster.Root, "config/samples/apps_v1alpha1_podset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	samplePath := filepath.Join(t.TempDir(), "podset.yaml")
	if err := os.WriteFile(samplePath, sample, 0o600); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for _, r := range []*release{a, b} {
		cluster.Kubectl(t, "apply", "-n", r.watched, "-f", samplePath)
	}
	for _, r := range []*release{a, b} {
		cluster.WaitReady(t, 2*time.Minute, r.watched, "podset/sleepers")
	}
	t.Logf("the two sample PodSets were Ready in %s", time.Since(start).Round(time.Second))
	onlyActedOn(t, a.watched, holderA)
	onlyActedOn(t, b.watched, holderB)

	// tend-b left the CRDs to tend: the conversion goes to tend's Service
	// with tend's CA, tend-b has neither a certificate nor a Service, and
	// its manager says why.
	caBundle := conversionCA(t, a)
	secret := &corev1.Secret{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: b.namespace, Name: "tend-webhook-server-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	if len(secret.Data) != 0 {
		t.Errorf("tend-b's certificate Secret has %d keys; its manager should keep no certificate", len(secret.Data))
	}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: b.namespace, Name: "tend-webhook-service"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("tend-b's webhook Service: %v; want none", err)
	}
	if log := cluster.PodLogs(t, b.namespace, holderB, "manager"); !strings.Contains(log, "Serving no webhook") {
		t.Errorf("tend-b's manager does not say that it serves no webhook:\n%s", log)
	}
	// tend's webhook converts for tend-b's namespace too.
	beta := &appsv1beta1.PodSet{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: b.watched, Name: "sleepers"}, beta); err != nil {
		t.Fatalf("reading tend-b's PodSet as v1beta1, through tend's webhook: %v", err)
	}
	if beta.Spec.Leader == nil || beta.Spec.Leader.Election != appsv1beta1.LeaderElectionEnabled {
		t.Errorf("tend-b's PodSet as v1beta1 has leader %+v, want election enabled", beta.Spec.Leader)
	}

	// Uninstalling tend-b removes its objects and nothing of tend's.
	leaseA := &coordinationv1.Lease{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: a.namespace, Name: "tend.tend.dev"}, leaseA); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	helm(t, "uninstall", b.name, "--namespace", b.namespace, "--wait", "--timeout", "3m")
	t.Logf("helm uninstall tend-b took %s (at %s)", time.Since(start).Round(time.Second), time.Since(began).Round(time.Second))
	checkClusterScoped(t, b, false)
	checkClusterScoped(t, a, true)
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: b.watched, Name: "sleepers"}, &appsv1alpha1.PodSet{}); err != nil {
		t.Errorf("tend-b's sample PodSet after helm uninstall: %v", err)
	}
	cluster.WaitForDeploymentAvailable(t, a.namespace, "tend-manager")
	cluster.WaitFor(t, time.Minute, "tend's Lease renewed by its leader after tend-b's uninstall", func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(leaseA), l); err != nil {
			return false, err
		}
		if h := ptrValue(l.Spec.HolderIdentity); !strings.HasPrefix(h, holderA+"_") {
			return false, framework.Stop(fmt.Errorf("held by %q, not by %s", h, holderA))
		}
		return l.Spec.RenewTime != nil && leaseA.Spec.RenewTime != nil && l.Spec.RenewTime.After(leaseA.Spec.RenewTime.Time), nil
	})
	if got := conversionCA(t, a); got != caBundle {
		t.Error("the PodSet CRD's caBundle changed when tend-b was uninstalled")
	}
	// tend's manager still acts, with its RBAC: it scales its sample.
	cluster.Kubectl(t, "scale", "-n", a.watched, "podset/sleepers", "--replicas=4")
	cluster.WaitReady(t, 2*time.Minute, a.watched, "podset/sleepers")
	ps := &appsv1alpha1.PodSet{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: a.watched, Name: "sleepers"}, ps); err != nil {
		t.Fatal(err)
	}
	if ps.Status.ReadyReplicas != 4 {
		t.Errorf("tend's sample has %d ready replicas after the scale to 4", ps.Status.ReadyReplicas)
	}
	onlyActedOn(t, a.watched, holderA)

	cert = certSecret(t)
	start = time.Now()
	helm(t, "uninstall", a.name, "--namespace", a.namespace, "--wait", "--timeout", "3m")
	t.Logf("helm uninstall tend took %s (at %s)", time.Since(start).Round(time.Second), time.Since(began).Round(time.Second))
	checkClusterScoped(t, a, false)
	// The CRDs stay (helm.sh/resource-policy: keep), and with them the
	// samples; read as stored (v1alpha1), as no manager converts now.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: "podsets.apps.tend.dev"}, crd); err != nil {
		t.Errorf("the PodSet CRD after helm uninstall: %v", err)
	}
	for _, r := range []*release{a, b} {
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: r.watched, Name: "sleepers"}, &appsv1alpha1.PodSet{}); err != nil {
			t.Errorf("the sample PodSet in %s after helm uninstall: %v", r.watched, err)
		}
	}
}

// certSecret returns the webhook certificate's Secret in tend-system, or
// nil if there is none with a certificate.
func certSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: framework.OperatorNamespace, Name: "tend-webhook-server-cert"}, s)
	if err != nil || len(s.Data["tls.crt"]) == 0 {
		return nil
	}
	return s
}

// installArgs are the arguments of helm install --wait for r (Helm 4
// waits through kstatus), the first release over config/local's objects.
func installArgs(t *testing.T, r *release) []string {
	t.Helper()
	values, err := yaml.Marshal(r.values)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), r.name+"-values.yaml")
	if err := os.WriteFile(file, values, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", r.name, "dist/chart", "--namespace", r.namespace, "--wait", "--timeout", "5m", "--values", file}
	if r.namespace == framework.OperatorNamespace {
		args = append(args, "--take-ownership", "--force-conflicts")
	}
	return args
}

// deleteLeftovers deletes the cluster-scoped objects of release r that a
// killed run left behind with r's namespace, which would make helm refuse
// to install r: only those whose Helm annotation names r.
func deleteLeftovers(t *testing.T, r *release) {
	t.Helper()
	for _, o := range clusterScoped {
		obj := o.obj.DeepCopyObject().(client.Object)
		err := cluster.Client.Get(t.Context(), client.ObjectKey{Name: r.prefix + o.name}, obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetAnnotations()["meta.helm.sh/release-name"] != r.name {
			t.Fatalf("%T %s exists and is not release %s's", obj, obj.GetName(), r.name)
		}
		uid := obj.GetUID()
		if err := cluster.Client.Delete(t.Context(), obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

// checkClusterScoped checks that r's cluster-scoped objects exist, each
// annotated as r's and bound to r's ClusterRole and ServiceAccount, or
// that none is left.
func checkClusterScoped(t *testing.T, r *release, exist bool) {
	t.Helper()
	for _, o := range clusterScoped {
		obj := o.obj.DeepCopyObject().(client.Object)
		name := r.prefix + o.name
		err := cluster.Client.Get(t.Context(), client.ObjectKey{Name: name}, obj)
		if !exist {
			if !apierrors.IsNotFound(err) {
				t.Errorf("%T %s after release %s was uninstalled: %v", obj, name, r.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("release %s's %T %s: %v", r.name, obj, name, err)
			continue
		}
		if ann := obj.GetAnnotations(); ann["meta.helm.sh/release-name"] != r.name || ann["meta.helm.sh/release-namespace"] != r.namespace {
			t.Errorf("%T %s belongs to release %s/%s, want %s/%s", obj, name,
				ann["meta.helm.sh/release-namespace"], ann["meta.helm.sh/release-name"], r.namespace, r.name)
		}
		if crb, ok := obj.(*rbacv1.ClusterRoleBinding); ok {
			want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tend-manager", Namespace: r.namespace}}
			if crb.RoleRef.Name != name || !slices.Equal(crb.Subjects, want) {
				t.Errorf("ClusterRoleBinding %s binds %s to %v, want %s to %v", name, crb.RoleRef.Name, crb.Subjects, name, want)
			}
		}
	}
}

// leader waits until r's Lease is held by a Ready manager pod of r's with
// r's --watch-namespaces, and returns the pod's name.
func leader(t *testing.T, r *release) string {
	t.Helper()
	var holder string
	cluster.WaitFor(t, 2*time.Minute, fmt.Sprintf("release %s's manager to hold the Lease %s/tend.tend.dev", r.name, r.namespace),
		func(ctx context.Context) (bool, error) {
			l := &coordinationv1.Lease{}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: "tend.tend.dev"}, l); err != nil {
				return false, err
			}
			// controller-runtime's identity: the pod's hostname, "_", a UUID.
			pod, _, ok := strings.Cut(ptrValue(l.Spec.HolderIdentity), "_")
			if !ok {
				return false, fmt.Errorf("holder %q", ptrValue(l.Spec.HolderIdentity))
			}
			p := &corev1.Pod{}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: pod}, p); err != nil {
				return false, fmt.Errorf("the holder's pod: %w", err)
			}
			if !slices.Contains(p.Spec.Containers[0].Args, "--watch-namespaces="+r.watched) {
				return false, fmt.Errorf("held by %s, whose args %v are not the release's", pod, p.Spec.Containers[0].Args)
			}
			holder = pod
			return true, nil
		})
	return holder
}

// onlyActedOn checks that the PodSet controller's Events in ns, one at
// least, all come from the manager pod holder: the recorder names the
// instance after its pod's hostname, the pod's name.
func onlyActedOn(t *testing.T, ns, holder string) {
	t.Helper()
	want := "tend-podset-" + holder
	cluster.WaitFor(t, time.Minute, fmt.Sprintf("the PodSet controller's Events in %s, from %s alone", ns, holder), func(ctx context.Context) (bool, error) {
		list := &corev1.EventList{}
		if err := cluster.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		n := 0
		for _, ev := range list.Items {
			if ev.ReportingController != "tend-podset" {
				continue
			}
			if ev.ReportingInstance != want {
				return false, framework.Stop(fmt.Errorf("%s %s about %s/%s comes from %s", ev.Reason, ev.Name, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.ReportingInstance))
			}
			n++
		}
		return n > 0, nil
	})
}

// conversionCA checks that the PodSet CRD's conversion webhook goes to r's
// Service with the CA in r's certificate Secret, and returns the CA.
func conversionCA(t *testing.T, r *release) string {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Name: "podsets.apps.tend.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	config, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
	service, _ := config["service"].(map[string]any)
	if service["namespace"] != r.namespace || service["name"] != "tend-webhook-service" {
		t.Errorf("the PodSet CRD converts through the Service %v, want %s/tend-webhook-service", service, r.namespace)
	}
	secret := &corev1.Secret{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: r.namespace, Name: "tend-webhook-server-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	ca, _ := config["caBundle"].(string)
	if want := base64.StdEncoding.EncodeToString(secret.Data["ca.crt"]); ca == "" || ca != want {
		t.Errorf("the PodSet CRD's caBundle is not the CA in release %s's Secret", r.name)
	}
	return ca
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
