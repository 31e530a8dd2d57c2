package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testing/repo"
	"github.com/tend-dev/tend/internal/webhook"
)

// Env is one kube-apiserver and etcd shared by the tests of a package.
type Env struct {
	// Config reaches the apiserver as a cluster administrator.
	Config *rest.Config
	// Client is an uncached client on Config, with Tend's scheme.
	Client client.Client
	// Root is the repository's root directory.
	Root string

	env *envtest.Environment
	// managers are the managers StartManager started, until they stop.
	managers sync.WaitGroup
}

// New returns an Env that Run will start.
func New() *Env { return &Env{} }

// Run starts the apiserver, runs the package's tests, stops the apiserver, and
// returns the exit code for os.Exit. Call it from TestMain:
//
//	var env = testenv.New()
//	func TestMain(m *testing.M) { os.Exit(env.Run(m)) }
func (e *Env) Run(m *testing.M) int {
	if err := e.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Stop stops the apiserver and etcd that Start started.
func (e *Env) Stop() error {
	if err := e.env.Stop(); err != nil {
		return fmt.Errorf("stopping the apiserver: %w", err)
	}
	return nil
}

// Start starts the apiserver and installs the CRDs, for a TestMain that
// must start other servers too; Run does this and Stop for the common case.
func (e *Env) Start() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	e.Root = root
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if assets, err = buildAssets(root); err != nil {
			return err
		}
	}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme.Scheme,
		// envtest gives every CRD whose kind is convertible in this scheme
		// a conversion webhook at a free local port, with a certificate it
		// makes for it; see WebhookOptions.
		CRDInstallOptions: envtest.CRDInstallOptions{Scheme: scheme.Scheme},
		// kube-apiserver's graceful shutdown on two loaded cores can take
		// longer than envtest's 20s default, which fails a package whose
		// tests all passed.
		ControlPlaneStopTimeout: time.Minute,
	}
	cfg, err := e.env.Start()
	if err != nil {
		return fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	e.Config = cfg
	e.Client, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	return nil
}

// WebhookOptions returns the manager's webhook options for serving the
// conversion webhooks that this apiserver calls.
//
// envtest points the conversion webhook of every CRD with more than one
// version (PodSet) at this test process. A package that reads or writes a
// version that is not stored serves it by running the manager with these
// options; only one manager at a time can, since the port is fixed. In a
// package that serves none, the stored versions work as before, and the
// others fail loudly (the apiserver reports the conversion webhook
// unreachable) rather than coming back unconverted.
func (e *Env) WebhookOptions() webhook.Options {
	w := e.env.WebhookInstallOptions
	opts := webhook.DefaultOptions()
	opts.CertMode = webhook.CertModeExternal
	opts.CertDir = w.LocalServingCertDir
	opts.Port = w.LocalServingPort
	return opts
}

// buildAssets asks the toolchain for the envtest binaries, building them
// when the cache lacks them, so that a bare "go test" works as "make test" does.
func buildAssets(root string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "hack", "toolchain.sh"), "--envtest")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("KUBEBUILDER_ASSETS is unset and hack/toolchain.sh --envtest failed: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Kubeconfig writes a kubeconfig for a cluster administrator of the apiserver
// into a temporary file and returns its path, for tests that run a binary.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	user, err := e.env.AddUser(envtest.User{Name: "tend-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding a user to the apiserver: %v", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("writing a kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for the calling test and deletes it when the
// test ends. Its name starts with the test's name.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	prefix := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller, so the namespace stays
		// Terminating; its name is unique, so that harms no other test.
		_ = e.Client.Delete(context.Background(), ns)
	})
	return ns.Name
}

// KStatus is what sigs.k8s.io/cli-utils' kstatus (the wait of Helm and
// Flux) computes for obj as the apiserver has it now, read uncached.
func (e *Env) KStatus(ctx context.Context, obj client.Object) (kstatus.Status, string, error) {
	gvk, err := apiutil.GVKForObject(obj, e.Client.Scheme())
	if err != nil {
		return "", "", err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		return "", "", err
	}
	return KStatusOf(u, e.Client.Scheme())
}

// KStatusOf is what kstatus computes for obj as it is, typed or not.
func KStatusOf(obj runtime.Object, s *runtime.Scheme) (kstatus.Status, string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			return "", "", err
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return "", "", err
		}
		u = &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(gvk)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		return "", "", err
	}
	return res.Status, res.Message, nil
}
