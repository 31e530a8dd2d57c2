//go:build e2e

package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testing/repo"
)

// Cluster is the local cluster, as the tests of one package see it.
type Cluster struct {
	// Root is the repository's root directory.
	Root string
	// Settings are the cluster's addresses and image names.
	Settings Settings
	// Config reaches the apiserver as a cluster administrator.
	Config *rest.Config
	// Client is an uncached client on Config, with Tend's scheme.
	Client client.Client
	// Clientset is a client-go clientset on Config, for what Client lacks
	// (pod logs, exec).
	Clientset kubernetes.Interface

	kubectl   string
	artifacts string
	times     timeTests
}

// Settings are what hack/cluster/settings.sh prints: the one source of the
// cluster's addresses and image names.
type Settings struct {
	// Kubeconfig is the administrator's kubeconfig.
	Kubeconfig string
	// LogDir holds each host component's log, such as kubelet.log.
	LogDir string
	// NodeName and NodeIP are the one node's name and address.
	NodeName string
	NodeIP   string
	// MotoURL is moto_server (SQS, S3), reachable at this URL from this
	// machine and from pods alike. See Cluster.MotoEnv.
	MotoURL string
	// StorageClass is the default StorageClass, which provisions volumes
	// dynamically.
	StorageClass string
	// The images that are imported into the node; pods must use
	// imagePullPolicy IfNotPresent or Never, as nothing can be pulled.
	BusyboxImage         string
	PauseImage           string
	TendImage            string
	EtcdImage            string
	EtcdUpgradeFromImage string
	// EtcdVersion is the default etcd operand's version; upgrades start
	// from EtcdUpgradeFromVersion.
	EtcdVersion            string
	EtcdUpgradeFromVersion string
}

// OperatorNamespace is where the manager runs (config/default).
const OperatorNamespace = "tend-system"

// New returns a Cluster that Run will set up.
func New() *Cluster { return &Cluster{} }

// Run sets the cluster up (see Start), runs the package's tests and returns
// the exit code for os.Exit. The cluster keeps running afterwards.
func (c *Cluster) Run(m *testing.M) int {
	// The tests that read what the agents stored (the archive) do it with
	// the agents' own code, which takes the AWS SDK's default credentials:
	// moto's, the only store these tests reach.
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"} {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
	if err := c.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := c.times.write(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: writing the tests' times: %v\n", err)
	}
	return code
}

// Start brings the local cluster up if it is not running, imports the test
// images, deploys the operator built from this work tree, and connects. Each
// step is a hack/cluster script that does nothing when there is nothing to
// do, so a running cluster costs a few seconds.
func (c *Cluster) Start() error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	c.Root = root
	if os.Geteuid() != 0 {
		return fmt.Errorf("the local cluster needs root, and this test runs as uid %d", os.Geteuid())
	}
	if c.Settings, err = c.readSettings(); err != nil {
		return err
	}
	start := time.Now()
	steps := [][]string{
		{"hack/cluster/up.sh"},
		{"hack/cluster/images.sh", "load", "busybox", "etcd", "etcd-upgrade-from"},
		{"hack/cluster/deploy.sh", "--local"},
	}
	for _, step := range steps {
		if err := c.script(step...); err != nil {
			return err
		}
	}
	out, err := c.output("hack/toolchain.sh", "kubectl")
	if err != nil {
		return err
	}
	c.kubectl = strings.TrimSpace(out)
	fmt.Fprintf(os.Stderr, "e2e: the cluster is up and the operator deployed (%s)\n", time.Since(start).Round(time.Second))

	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Settings.Kubeconfig); err != nil {
		return fmt.Errorf("reading %s: %w", c.Settings.Kubeconfig, err)
	}
	c.Config.QPS, c.Config.Burst = 50, 100
	// The client logs warnings (deprecated APIs, for one) through
	// controller-runtime's logger.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if c.Client, err = client.New(c.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("creating a clientset: %w", err)
	}
	c.artifacts = os.Getenv("ARTIFACTS")
	if c.artifacts == "" {
		c.artifacts = filepath.Join(root, ".cache", "e2e-artifacts", time.Now().UTC().Format("20060102-150405"))
	}
	return c.deleteLeftovers(start)
}

// deleteLeftovers deletes, in the background, the namespaces that a run
// before this one made and never deleted: it was killed before its
// cleanups ran. What they hold (etcd members, backup schedules, PodSets)
// would otherwise share the node with this run for good. One run uses the
// cluster at a time, so every such namespace made before this run started
// is a leftover.
func (c *Cluster) deleteLeftovers(before time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list corev1.NamespaceList
	if err := c.Client.List(ctx, &list, client.HasLabels{E2ELabel}); err != nil {
		return fmt.Errorf("listing the namespaces of earlier runs: %w", err)
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp != nil || !ns.CreationTimestamp.Before(&metav1.Time{Time: before}) {
			continue
		}
		// The one that was listed, not another of its name made since.
		if err := c.Client.Delete(ctx, ns, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the namespace %s, left by an earlier run: %w", ns.Name, err)
		}
		fmt.Fprintf(os.Stderr, "e2e: deleting the namespace %s, left by an earlier run that was killed\n", ns.Name)
	}
	return nil
}

// MotoEnv is the environment that points the AWS SDK (and tend's agents) at
// the cluster's moto_server, with moto's fake credentials, for a container
// that talks to SQS or S3.
func (c *Cluster) MotoEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "AWS_ENDPOINT_URL", Value: c.Settings.MotoURL},
		{Name: "AWS_REGION", Value: "us-east-1"},
		{Name: "AWS_ACCESS_KEY_ID", Value: "test"},
		{Name: "AWS_SECRET_ACCESS_KEY", Value: "test"},
	}
}

// readSettings parses hack/cluster/settings.sh's KEY=value lines.
func (c *Cluster) readSettings() (Settings, error) {
	out, err := c.output("hack/cluster/settings.sh")
	if err != nil {
		return Settings{}, err
	}
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	s := Settings{
		Kubeconfig:             kv["KUBECONFIG"],
		LogDir:                 kv["LOG_DIR"],
		NodeName:               kv["NODE_NAME"],
		NodeIP:                 kv["NODE_IP"],
		MotoURL:                kv["MOTO_URL"],
		StorageClass:           kv["STORAGE_CLASS"],
		BusyboxImage:           kv["BUSYBOX_IMAGE"],
		PauseImage:             kv["PAUSE_IMAGE"],
		TendImage:              kv["TEND_IMAGE"],
		EtcdImage:              kv["ETCD_IMAGE"],
		EtcdUpgradeFromImage:   kv["ETCD_UPGRADE_FROM_IMAGE"],
		EtcdVersion:            kv["ETCD_VERSION"],
		EtcdUpgradeFromVersion: kv["ETCD_UPGRADE_FROM_VERSION"],
	}
	for k, v := range map[string]string{"KUBECONFIG": s.Kubeconfig, "MOTO_URL": s.MotoURL, "BUSYBOX_IMAGE": s.BusyboxImage, "ETCD_IMAGE": s.EtcdImage} {
		if v == "" {
			return Settings{}, fmt.Errorf("hack/cluster/settings.sh printed no %s", k)
		}
	}
	return s, nil
}

// script runs a repository script with its output on our stderr, so that a
// slow first build shows its progress.
func (c *Cluster) script(args ...string) error {
	cmd := exec.Command(filepath.Join(c.Root, args[0]), args[1:]...)
	cmd.Dir = c.Root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s failed: %w (its output is above)", strings.Join(args, " "), err)
	}
	return nil
}

// output runs a repository script and returns its stdout.
func (c *Cluster) output(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(c.Root, args[0]), args[1:]...)
	cmd.Dir = c.Root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s failed: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
