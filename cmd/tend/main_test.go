package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	appsv1beta1 "github.com/tend-dev/tend/api/apps/v1beta1"
	"github.com/tend-dev/tend/internal/testenv"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

var env = testenv.New()

// runMainEnv makes the test binary act as the tend binary, so that the tests
// run the real main, in a process of its own, without a separate build.
const runMainEnv = "TEND_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stderr))
	}
	os.Exit(env.Run(m))
}

// process is a tend binary running in the background.
type process struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// startTend runs "tend args..." and kills it, if it still runs, when the test
// ends. Its output is printed when the test fails.
func startTend(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // fails harmlessly when it has exited
		<-p.done
		if t.Failed() {
			t.Logf("output of tend %s:\n%s", strings.Join(args, " "), p.out.String())
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit error, or fails the test if the
// process does not exit at all.
func (p *process) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(time.Minute):
		t.Fatal("tend did not exit after SIGTERM")
		return nil
	}
}

// managerArgs are the flags of a manager that serves metrics, probes and
// webhooks on free loopback ports, and elects its leader through the Lease
// ns/lease.
func managerArgs(t *testing.T, ns, lease string) (args []string, metricsURL, probeURL string) {
	metrics, probe := loopback.TestAddr(t), loopback.TestAddr(t)
	_, webhookPort, err := net.SplitHostPort(loopback.TestAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"manager",
		"--kubeconfig=" + env.Kubeconfig(t),
		// envtest's certificate; the apiserver calls another port.
		"--webhook-cert-mode=external",
		"--webhook-cert-dir=" + env.WebhookOptions().CertDir,
		"--webhook-port=" + webhookPort,
		"--leader-elect",
		"--leader-election-namespace=" + ns,
		"--leader-election-id=" + lease,
		// Short leases keep the follower's takeover quick; the release on
		// SIGTERM is what the test relies on, not the expiry.
		"--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms",
		"--metrics-bind-address=" + metrics,
		"--metrics-secure=false",
		"--health-probe-bind-address=" + probe,
	}, "http://" + metrics + "/metrics", "http://" + probe
}

func TestManagerServesProbesAndMetricsAndLeadsUntilSIGTERM(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	args, metricsURL, probeURL := managerArgs(t, ns, "tend-test")

	first := startTend(t, args...)

	g.Eventually(func() (string, error) { return loopback.Get(probeURL + "/healthz") }).
		WithTimeout(time.Minute).Should(Equal("ok"))
	g.Eventually(func() (string, error) { return loopback.Get(probeURL + "/readyz") }).Should(Equal("ok"))

	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: "tend-test"}
	g.Eventually(func() (string, error) {
		err := env.Client.Get(context.Background(), key, lease)
		return ptrValue(lease.Spec.HolderIdentity), err
	}).WithTimeout(time.Minute).ShouldNot(BeEmpty())
	firstHolder := *lease.Spec.HolderIdentity

	g.Eventually(func() (string, error) { return loopback.Get(metricsURL) }).
		Should(ContainSubstring(`leader_election_master_status{name="tend-test"} 1`))

	// A second replica waits for the Lease instead of reconciling.
	args2, metricsURL2, _ := managerArgs(t, ns, "tend-test")
	second := startTend(t, args2...)
	g.Eventually(func() (string, error) { return loopback.Get(metricsURL2) }).
		WithTimeout(time.Minute).Should(ContainSubstring("controller_runtime_"))
	g.Consistently(func() (string, error) { return loopback.Get(metricsURL2) }).WithTimeout(3 * time.Second).
		ShouldNot(ContainSubstring(`leader_election_master_status{name="tend-test"} 1`))

	// SIGTERM: a clean exit that hands the Lease over.
	g.Expect(first.stop(t)).To(Succeed())
	g.Expect(first.out.String()).To(ContainSubstring("The manager stopped"))
	g.Eventually(func() (string, error) {
		err := env.Client.Get(context.Background(), key, lease)
		return ptrValue(lease.Spec.HolderIdentity), err
	}).WithTimeout(time.Minute).Should(And(Not(BeEmpty()), Not(Equal(firstHolder))))
	g.Eventually(func() (string, error) { return loopback.Get(metricsURL2) }).
		Should(ContainSubstring(`leader_election_master_status{name="tend-test"} 1`))

	// The last replica releases the Lease on its way out.
	g.Expect(second.stop(t)).To(Succeed())
	g.Expect(env.Client.Get(context.Background(), key, lease)).To(Succeed())
	g.Expect(ptrValue(lease.Spec.HolderIdentity)).To(BeEmpty())
}

// The conversion webhook is served whatever --controllers selects, even
// none: every read of a PodSet as v1beta1 needs it.
func TestManagerServesConversionWithoutControllers(t *testing.T) {
	g := NewWithT(t)
	hooks := env.WebhookOptions()
	probe := loopback.TestAddr(t)
	startTend(t, "manager",
		"--kubeconfig="+env.Kubeconfig(t),
		"--controllers=",
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+probe,
		"--webhook-cert-mode=external",
		"--webhook-cert-dir="+hooks.CertDir,
		"--webhook-port="+strconv.Itoa(hooks.Port),
	)
	g.Eventually(func() (string, error) { return loopback.Get("http://" + probe + "/readyz") }).
		WithTimeout(time.Minute).Should(Equal("ok"))

	ps := &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "db"},
		Spec: appsv1beta1.PodSetSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}},
			Leader:   &appsv1beta1.Leader{Election: appsv1beta1.LeaderElectionEnabled},
		},
	}
	g.Expect(env.Client.Create(context.Background(), ps)).To(Succeed())
	stored := &appsv1alpha1.PodSet{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ps), stored)).To(Succeed())
	g.Expect(stored.Spec.LeaderElection).To(BeTrue())
}

// A manager beside another Tend on the cluster (--webhook-disabled) is
// ready without any certificate, outside a pod too, where the default
// rotation refuses to start for want of a namespace; it listens on no
// webhook port, and says why.
func TestManagerWithTheWebhookDisabledIsReadyWithoutACertificate(t *testing.T) {
	g := NewWithT(t)
	probe := loopback.TestAddr(t)
	_, webhookPort, err := net.SplitHostPort(loopback.TestAddr(t))
	g.Expect(err).NotTo(HaveOccurred())
	p := startTend(t, "manager",
		"--kubeconfig="+env.Kubeconfig(t),
		"--controllers=",
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+probe,
		"--webhook-disabled",
		"--webhook-port="+webhookPort,
	)
	g.Eventually(func() (string, error) { return loopback.Get("http://" + probe + "/readyz") }).
		WithTimeout(time.Minute).Should(Equal("ok"))
	_, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", webhookPort))
	g.Expect(err).To(HaveOccurred(), "nothing listens on the webhook port")
	g.Expect(p.stop(t)).To(Succeed())
	g.Expect(p.out.String()).To(ContainSubstring("Serving no webhook"))
}

func TestManagerRejectsAnUnknownController(t *testing.T) {
	g := NewWithT(t)
	var stderr bytes.Buffer
	code := run([]string{"manager", "--controllers=*,-nosuch"}, &stderr)
	g.Expect(code).To(Equal(1))
	g.Expect(stderr.String()).To(ContainSubstring(`unknown controller "nosuch"`))
}

func TestUnknownCommandPrintsUsage(t *testing.T) {
	g := NewWithT(t)
	var stderr bytes.Buffer
	g.Expect(run([]string{"frobnicate"}, &stderr)).To(Equal(2))
	g.Expect(stderr.String()).To(ContainSubstring("Usage: tend COMMAND"))
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// syncBuffer is a bytes.Buffer that a process and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
