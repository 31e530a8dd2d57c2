//go:build e2e

// Package helm installs Tend with its Helm chart (dist/chart) into the local
// cluster with the pinned Helm, as a user would, over the Tend that the
// e2e framework deployed from config/local, and runs a sample. make
// test-helm runs it, with HELM set, after the e2e tests and alone: it
// replaces the cluster's operator while it runs.
package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

var cluster = framework.New()

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

// helm runs the pinned Helm on the local cluster and returns its output.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	path := os.Getenv("HELM")
	if path == "" {
		t.Fatal("HELM is not set: run make test-helm, which builds the pinned Helm")
	}
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Dir = cluster.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Settings.Kubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestHelmInstallRunsASample installs the chart with helm install --wait
// (Helm 4 waits through kstatus), checks that the manager is the chart's,
// runs a PodSet to Ready, and uninstalls, which keeps the CRDs and the
// objects. Then config/local is deployed again for what follows.
func TestHelmInstallRunsASample(t *testing.T) {
	ctx := t.Context()
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(cluster.Root, "hack/cluster/deploy.sh"), "--local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("deploying config/local again after the Helm test: %v\n%s", err, out)
		}
	})
	ref, err := exec.Command(filepath.Join(cluster.Root, "hack/cluster/images.sh"), "ref", "tend").Output()
	if err != nil {
		t.Fatalf("the tend image's reference: %v", err)
	}
	repository, digest, ok := strings.Cut(strings.TrimSpace(string(ref)), "@")
	if !ok {
		t.Fatalf("the tend image's reference %q has no digest", ref)
	}
	// config/local's credentials Secret has a generated name: take it from
	// the manager it deployed.
	deployed := &appsv1.Deployment{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: "tend-manager"}, deployed); err != nil {
		t.Fatal(err)
	}
	envFrom := deployed.Spec.Template.Spec.Containers[0].EnvFrom
	if len(envFrom) != 1 || envFrom[0].SecretRef == nil {
		t.Fatalf("config/local's manager has envFrom %v; want its credentials Secret", envFrom)
	}
	values, err := yaml.Marshal(map[string]any{
		"image": map[string]any{"repository": repository, "digest": digest},
		// As config/local: moto for SQS, its fake credentials from a Secret.
		"sqs": map[string]any{"endpoint": cluster.Settings.MotoURL, "region": "us-east-1", "credentialsSecret": envFrom[0].SecretRef.Name},
	})
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		t.Fatal(err)
	}

	// A release that a killed run left behind would refuse the name.
	helm(t, "uninstall", "tend", "--namespace", framework.OperatorNamespace, "--ignore-not-found", "--wait")
	start := time.Now()
	helm(t, "install", "tend", "dist/chart", "--namespace", framework.OperatorNamespace,
		"--take-ownership", "--force-conflicts", "--wait", "--timeout", "5m", "--values", valuesFile)
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Second))

	d := &appsv1.Deployment{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: "tend-manager"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Annotations["meta.helm.sh/release-name"] != "tend" {
		t.Errorf("the manager's Deployment is not the release's: annotations %v", d.Annotations)
	}
	if image := d.Spec.Template.Spec.Containers[0].Image; image != strings.TrimSpace(string(ref)) {
		t.Errorf("the manager runs %s, want the chart's value %s", image, ref)
	}
	if d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas != 1 {
		t.Errorf("helm install --wait returned with the manager at generation %d of %d, %d available",
			d.Status.ObservedGeneration, d.Generation, d.Status.AvailableReplicas)
	}
	if status := helm(t, "status", "tend", "--namespace", framework.OperatorNamespace); !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("helm status:\n%s", status)
	}

	ns := cluster.Namespace(t)
	sample, err := os.ReadFile(filepath.Join(cluster.Root, "config/samples/apps_v1alpha1_podset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	samplePath := filepath.Join(t.TempDir(), "podset.yaml")
	if err := os.WriteFile(samplePath, sample, 0o600); err != nil {
		t.Fatal(err)
	}
	cluster.Kubectl(t, "apply", "-n", ns, "-f", samplePath)
	cluster.WaitReady(t, 2*time.Minute, ns, "podset/sleepers")

	helm(t, "uninstall", "tend", "--namespace", framework.OperatorNamespace, "--wait", "--timeout", "3m")
	// The CRDs stay (helm.sh/resource-policy: keep), and with them the
	// sample; read as stored (v1alpha1), as no manager converts now.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: "podsets.apps.tend.dev"}, crd); err != nil {
		t.Errorf("the PodSet CRD after helm uninstall: %v", err)
	}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sleepers"}, &appsv1alpha1.PodSet{}); err != nil {
		t.Errorf("the sample PodSet after helm uninstall: %v", err)
	}
}
