package podset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testenv"
)

// rig is what every benchmark of the run shares: one kube-apiserver and
// etcd, kwok standing in for the kubelets of fake Nodes, and the binaries
// of the two controllers, which each measured phase starts and stops.
type rig struct {
	env *testenv.Env
	// dir holds the kubeconfig, the tend binary and every process's log.
	dir        string
	kubeconfig string
	// cfg and cs reach the apiserver as an administrator with no client-side
	// rate limit: the harness must never be what a phase waits for.
	cfg *rest.Config
	cs  kubernetes.Interface
	c   client.Client

	kwok  *process
	tend  string // bin/tend built from this tree
	kcm   string // kube-controller-manager from the toolchain
	nodes []string
}

var (
	sharedOnce sync.Once
	shared     *rig
	sharedErr  error
)

// getRig returns the run's rig, starting it on first use: the package's
// unit tests need none of it, so "go test ./..." starts nothing.
func getRig(b *testing.B) *rig {
	b.Helper()
	sharedOnce.Do(func() {
		shared = &rig{env: testenv.New()}
		sharedErr = shared.start(b)
	})
	if sharedErr != nil {
		b.Fatalf("starting the benchmark's cluster: %v", sharedErr)
	}
	return shared
}

// stopRig stops what getRig started; TestMain calls it after the run.
func stopRig() error {
	if shared == nil {
		return nil
	}
	var errs []error
	if shared.kwok != nil {
		errs = append(errs, shared.kwok.stop())
	}
	if shared.env.Config != nil {
		errs = append(errs, shared.env.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, shared.dir)
	}
	return os.RemoveAll(shared.dir)
}

// start starts the rig's parts; stopRig stops whichever of them started.
func (r *rig) start(b *testing.B) error {
	var err error
	if r.dir, err = os.MkdirTemp("", "tend-bench-podset-"); err != nil {
		return err
	}
	if err := r.env.Start(); err != nil {
		return err
	}
	r.cfg = rest.CopyConfig(r.env.Config)
	r.cfg.QPS, r.cfg.Burst = -1, 0
	if r.cs, err = kubernetes.NewForConfig(r.cfg); err != nil {
		return err
	}
	if r.c, err = client.New(r.cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return err
	}
	// The kubeconfig that testenv writes lives in the calling benchmark's
	// temporary directory; the child processes of later benchmarks need
	// one for the whole run.
	data, err := os.ReadFile(r.env.Kubeconfig(b))
	if err != nil {
		return err
	}
	r.kubeconfig = filepath.Join(r.dir, "kubeconfig")
	if err := os.WriteFile(r.kubeconfig, data, 0o600); err != nil {
		return err
	}
	if r.kcm, err = toolchain(r.env.Root, "kube-controller-manager"); err != nil {
		return err
	}
	kwokBin, err := toolchain(r.env.Root, "kwok")
	if err != nil {
		return err
	}
	r.tend = filepath.Join(r.dir, "tend")
	build := exec.Command("go", "build", "-o", r.tend, "./cmd/tend")
	build.Dir = r.env.Root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building tend: %w\n%s", err, out)
	}
	conf, err := filepath.Abs(filepath.Join("testdata", "kwok.yaml"))
	if err != nil {
		return err
	}
	r.kwok, err = r.run("kwok", kwokBin, "-c", conf, "--kubeconfig", r.kubeconfig)
	if err != nil {
		return err
	}
	if err := r.createNodes(*flagNodes); err != nil {
		return err
	}
	return nil
}

// toolchain returns the path of a tool that hack/toolchain.sh builds.
func toolchain(root, tool string) (string, error) {
	var stderr strings.Builder
	cmd := exec.Command(filepath.Join(root, "hack", "toolchain.sh"), tool)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/toolchain.sh %s: %w\n%s", tool, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// nodeAnnotation marks the Nodes that kwok manages (testdata/kwok.yaml).
const nodeAnnotation = "kwok.x-k8s.io/node"

// createNodes creates n fake Nodes, each with a /16 of pod IPs, and waits
// until kwok has marked them Ready.
func (r *rig) createNodes(n int) error {
	ctx := context.Background()
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%d", i),
				Annotations: map[string]string{nodeAnnotation: "fake"},
				Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: fmt.Sprintf("kwok-node-%d", i)},
			},
			Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.0.0/16", 64+i)},
		}
		if _, err := r.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		r.nodes = append(r.nodes, node.Name)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range r.nodes {
			node, err := r.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !nodeReady(node) {
				return false, r.kwok.err()
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kwok to make the nodes Ready: %w (kwok's log: %s)", err, r.kwok.log)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// process is a child process whose output goes to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	// exitErr is how it ended; read it only after done is closed.
	exitErr error
}

// run starts bin with args, its output in a log file under the rig's dir.
func (r *rig) run(name, bin string, args ...string) (*process, error) {
	f, err := os.CreateTemp(r.dir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: exec.Command(bin, args...), log: f.Name(), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// err returns an error if the process has exited: it should run until stop.
func (p *process) err() error {
	select {
	case <-p.done:
		err := p.exitErr
		if err == nil {
			err = errors.New("exit status 0")
		}
		return fmt.Errorf("%s exited early: %w; its log: %s\n%s", p.name, err, p.log, tail(p.log, 20))
	default:
		return nil
	}
}

// stop ends the process with SIGTERM, or SIGKILL after 20 seconds, and
// reports an early exit.
func (p *process) stop() error {
	if err := p.err(); err != nil {
		return err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// cpu returns the CPU time the process has used so far, user and system,
// or 0 once it has exited.
func (p *process) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command may hold spaces: fields count from the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// In clock ticks of 1/100 s (USER_HZ, 100 on Linux).
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// machineCPU is the CPU time that every process on the machine has used
// since it booted: /proc/stat's first line, all but its idle and iowait
// columns (and the guest ones, which user already counts).
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	var busy int64
	// user nice system idle iowait irq softirq steal
	for i, f := range fields[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		v, _ := strconv.ParseInt(f, 10, 64)
		busy += v
	}
	// In clock ticks of 1/100 s (USER_HZ, 100 on Linux).
	return time.Duration(busy) * 10 * time.Millisecond
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// requests reads the apiserver's request counters.
func (r *rig) requests(ctx context.Context) (Requests, error) {
	text, err := r.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	return ParseRequests(string(text))
}

// namespace creates a namespace for one phase. Its pods are deleted by the
// phase's cleanup; envtest runs no namespace controller, so the namespace
// itself stays, empty.
func (r *rig) namespace(b *testing.B, prefix string) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	ns, err := r.cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}
