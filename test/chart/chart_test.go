//go:build chart

package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tend-dev/tend/internal/testing/repo"
)

// tool is the path of a tool that make test-chart passes in env; the test
// fails without it rather than skip.
func tool(t *testing.T, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Fatalf("%s is not set: run make test-chart, which builds the pinned tools", env)
	}
	return path
}

// root is the work tree's root.
func root(t *testing.T) string {
	t.Helper()
	dir, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = root(t)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// objects decodes a multi-document YAML stream, keyed by kind/name.
func objects(t *testing.T, stream []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("a rendered object does not decode: %v\n%s", err, doc)
		}
		if obj.GetKind() == "" || obj.GetName() == "" {
			t.Fatalf("a rendered object has no kind or name:\n%s", doc)
		}
		key := obj.GetKind() + "/" + obj.GetName()
		if _, dup := out[key]; dup {
			t.Fatalf("%s is rendered twice", key)
		}
		out[key] = obj
	}
	return out
}

func render(t *testing.T, values string) map[string]*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "tend", "dist/chart", "--namespace", "tend-system"}
	if values != "" {
		args = append(args, "--values", values)
	}
	return objects(t, run(t, tool(t, "HELM"), args...))
}

// With the default values the chart is config/default, object for object,
// less the Namespace (Helm installs into the release's) and plus the
// annotation that keeps the CRDs on uninstall.
func TestDefaultValuesRenderConfigDefault(t *testing.T) {
	want := objects(t, run(t, tool(t, "KUBECTL"), "kustomize", "config/default"))
	delete(want, "Namespace/tend-system")
	got := render(t, "")
	for key, obj := range got {
		if obj.GetKind() == "CustomResourceDefinition" {
			ann := obj.GetAnnotations()
			if ann["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s lacks helm.sh/resource-policy: keep", key)
			}
			delete(ann, "helm.sh/resource-policy")
			obj.SetAnnotations(ann)
		}
	}
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("the chart does not render %s, which config/default has", key)
			continue
		}
		if !reflect.DeepEqual(g.Object, w.Object) {
			gy, _ := yaml.Marshal(g.Object)
			wy, _ := yaml.Marshal(w.Object)
			t.Errorf("%s differs from config/default's; run make manifests.\n--- chart\n%s\n--- config/default\n%s", key, gy, wy)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("the chart renders %s, which config/default lacks", key)
		}
	}
}

// Every values file renders objects that decode, with what it asks for.
func TestValuesFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root(t), "dist/chart/ci/*-values.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("dist/chart/ci holds %d values files (%v); want the six the chart is tested with", len(files), err)
	}
	checks := map[string]func(t *testing.T, objs map[string]*unstructured.Unstructured){
		"default-values.yaml": func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			for _, key := range []string{"ServiceMonitor/tend-controller-manager", "PodMonitor/tend-etcd-members", "PrometheusRule/tend-rules", "Certificate/tend-serving-cert"} {
				if objs[key] != nil {
					t.Errorf("%s is rendered by default", key)
				}
			}
			if n := len(dashboardConfigMaps(objs)); n != 0 {
				t.Errorf("%d dashboard ConfigMaps are rendered by default", n)
			}
		},
		"monitoring-values.yaml": func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			for _, key := range []string{"ServiceMonitor/tend-controller-manager", "PodMonitor/tend-etcd-members", "PrometheusRule/tend-rules"} {
				if objs[key] == nil {
					t.Errorf("%s is missing", key)
				}
			}
			rules := fmt.Sprint(objs["PrometheusRule/tend-rules"].Object)
			if !strings.Contains(rules, "{{ $labels.namespace }}") {
				t.Errorf("the PrometheusRule lost its alert templates: %s", rules)
			}
			checkDashboards(t, dashboardConfigMaps(objs))
		},
		"cert-manager-values.yaml": func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			if objs["Certificate/tend-serving-cert"] == nil || objs["Issuer/tend-selfsigned"] == nil {
				t.Error("no Certificate and self-signed Issuer")
			}
			if objs["Secret/tend-webhook-server-cert"] != nil {
				t.Error("the manager's own certificate Secret is rendered beside cert-manager's")
			}
			if got := objs["CustomResourceDefinition/podsets.apps.tend.dev"].GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "tend-system/tend-serving-cert" {
				t.Errorf("the PodSet CRD's inject-ca-from is %q", got)
			}
			wantArgs(t, objs, "--webhook-cert-mode=external")
		},
		"namespaces-sqs-values.yaml": func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			wantArgs(t, objs, "--watch-namespaces=team-a,team-b", "--sqs-endpoint=http://sqs.example.internal:4566",
				"--sqs-region=eu-west-1", "--kube-api-qps=50")
			c := container(t, objs)
			if !strings.HasPrefix(c["image"].(string), "ghcr.io/tend-dev/tend@sha256:") {
				t.Errorf("image %v; want the digest", c["image"])
			}
			if fmt.Sprint(c["envFrom"]) != "[map[secretRef:map[name:tend-aws]]]" {
				t.Errorf("envFrom %v; want the credentials Secret", c["envFrom"])
			}
		},
		"second-release-values.yaml": func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			checkSecondRelease(t, objs, "tend-team-b-")
		},
		"replicas-values.yaml": func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			d := objs["Deployment/tend-manager"]
			if n, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(n) != "2" {
				t.Errorf("replicas %v, want 2", n)
			}
			for _, field := range []string{"nodeSelector", "tolerations", "affinity"} {
				if _, ok, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "template", "spec", field); !ok {
					t.Errorf("the pod has no %s", field)
				}
			}
			if objs["Issuer/tend-selfsigned"] != nil {
				t.Error("a self-signed Issuer beside the issuerRef given")
			}
			for key := range objs {
				if strings.HasPrefix(key, "CustomResourceDefinition/") {
					t.Errorf("crds.install false still renders %s", key)
				}
			}
		},
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			run(t, tool(t, "HELM"), "lint", "--strict", "dist/chart", "--values", file)
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no check for %s: add one", name)
			}
			check(t, render(t, file))
		})
	}
}

// checkSecondRelease checks a release beside another on one cluster:
// every cluster-scoped object, and every reference to one, carries its
// prefix, so that neither release's install or uninstall touches the
// other's; it installs no CRD, serves no webhook (no Service to route to)
// and still mounts its certificate Secret, empty.
func checkSecondRelease(t *testing.T, objs map[string]*unstructured.Unstructured, prefix string) {
	t.Helper()
	var cluster []string
	for key, obj := range objs {
		if obj.GetNamespace() != "" {
			if ref, ok, _ := unstructured.NestedString(obj.Object, "roleRef", "kind"); ok && ref == "ClusterRole" {
				t.Errorf("%s binds a ClusterRole in a namespace; check that its name is the release's", key)
			}
			continue
		}
		cluster = append(cluster, key)
		switch obj.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			if !strings.HasPrefix(obj.GetName(), prefix) {
				t.Errorf("%s is cluster-scoped and not named %s...: another release has the same", key, prefix)
			}
		default:
			t.Errorf("%s is cluster-scoped: a second release would share it", key)
		}
		if ref, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name"); obj.GetKind() == "ClusterRoleBinding" && !strings.HasPrefix(ref, prefix) {
			t.Errorf("%s binds the ClusterRole %s, not the release's", key, ref)
		}
	}
	slices.Sort(cluster)
	want := []string{
		"ClusterRole/" + prefix + "manager", "ClusterRole/" + prefix + "metrics-auth", "ClusterRole/" + prefix + "metrics-reader",
		"ClusterRoleBinding/" + prefix + "manager", "ClusterRoleBinding/" + prefix + "metrics-auth",
	}
	if !slices.Equal(cluster, want) {
		t.Errorf("the cluster-scoped objects are %v, want %v", cluster, want)
	}
	if objs["Service/tend-webhook-service"] != nil {
		t.Error("a webhook Service, with the webhook disabled")
	}
	if objs["Secret/tend-webhook-server-cert"] == nil {
		t.Error("no certificate Secret: the manager's pod mounts it")
	}
	if objs["Certificate/tend-serving-cert"] != nil {
		t.Error("a cert-manager Certificate, with the webhook disabled")
	}
	wantArgs(t, objs, "--webhook-disabled", "--watch-namespaces=team-b")
	for _, a := range container(t, objs)["args"].([]any) {
		if strings.HasPrefix(a.(string), "--webhook-cert-mode") {
			t.Errorf("the manager has %s beside --webhook-disabled", a)
		}
	}
}

// A release whose webhook is off may not install the CRDs: their
// conversion would go to it, and nothing would answer.
func TestWebhookDisabledRefusesToInstallTheCRDs(t *testing.T) {
	var stderr bytes.Buffer
	cmd := exec.Command(tool(t, "HELM"), "template", "tend", "dist/chart", "--set", "webhook.enabled=false")
	cmd.Dir = root(t)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("helm template renders webhook.enabled=false with crds.install true")
	}
	if !strings.Contains(stderr.String(), "webhook.enabled false needs crds.install false") {
		t.Errorf("helm template failed otherwise than expected: %s", stderr.String())
	}
}

// With the webhook off, cert-manager issues nothing, even when asked to,
// and the Secret that the pod mounts is the chart's own.
func TestWebhookDisabledWinsOverCertManager(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("crds: {install: false}\nwebhook: {enabled: false, certManager: {enabled: true}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := render(t, values)
	for _, key := range []string{"Certificate/tend-serving-cert", "Issuer/tend-selfsigned", "Service/tend-webhook-service"} {
		if objs[key] != nil {
			t.Errorf("%s is rendered with the webhook disabled", key)
		}
	}
	if objs["Secret/tend-webhook-server-cert"] == nil {
		t.Error("no certificate Secret for the pod to mount")
	}
	wantArgs(t, objs, "--webhook-disabled")
	for _, a := range container(t, objs)["args"].([]any) {
		if a == "--webhook-cert-mode=external" {
			t.Error("--webhook-cert-mode=external beside --webhook-disabled")
		}
	}
}

func container(t *testing.T, objs map[string]*unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(objs["Deployment/tend-manager"].Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("the manager's Deployment has %d containers", len(cs))
	}
	return cs[0].(map[string]any)
}

func wantArgs(t *testing.T, objs map[string]*unstructured.Unstructured, want ...string) {
	t.Helper()
	var args []string
	for _, a := range container(t, objs)["args"].([]any) {
		args = append(args, a.(string))
	}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("the manager's args %v lack %s", args, w)
		}
	}
}

// dashboardConfigMaps are the rendered ConfigMaps that Grafana's sidecar loads.
func dashboardConfigMaps(objs map[string]*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" && obj.GetLabels()["grafana_dashboard"] == "1" {
			out = append(out, obj)
		}
	}
	return out
}

// checkDashboards checks that the chart carries each dashboard of
// config/grafana byte for byte (the braces of Grafana's legends survive
// Helm's templating).
func checkDashboards(t *testing.T, cms []*unstructured.Unstructured) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "config/grafana/*.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cm := range cms {
		if cm.GetNamespace() != "tend-system" {
			t.Errorf("ConfigMap %s is in namespace %q, want the release's", cm.GetName(), cm.GetNamespace())
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		for k, v := range data {
			got[k] = v
		}
	}
	if len(got) != len(files) {
		t.Errorf("the chart renders %d dashboards, config/grafana has %d", len(got), len(files))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got[filepath.Base(f)] != string(want) {
			t.Errorf("the chart's %s differs from config/grafana's", filepath.Base(f))
		}
	}
}
