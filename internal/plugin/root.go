package plugin

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/scheme"
)

// Command groups, as `kubectl tend --help` lists them.
const (
	groupInspect = "inspect"
	groupAct     = "act"
)

// options are what every command shares: kubectl's connection flags and
// the streams.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// NewCommand returns the kubectl-tend command tree.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-tend",
		Short: "Inspect and operate Tend's PodSets, EtcdClusters and Queues",
		Long: `kubectl tend explains Tend's resources at a glance and performs day-2
actions on them. Actions only create, patch or annotate resources; the
operator does the work.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations: map[string]string{
			// kubectl shows "kubectl tend" in usage lines.
			cobra.CommandDisplayNameAnnotation: "kubectl tend",
		},
	}
	o.flags.AddFlags(root.PersistentFlags())
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.AddGroup(
		&cobra.Group{ID: groupInspect, Title: "Inspect:"},
		&cobra.Group{ID: groupAct, Title: "Act:"},
	)
	root.AddCommand(
		newStatusCommand(o),
		newReportCommand(o),
		newBackupCommand(o),
		newRestoreCommand(o),
		newDefragCommand(o),
		newPauseCommand(o, true),
		newPauseCommand(o, false),
		newQueueCommand(o),
		newVersionCommand(o),
	)
	return root
}

// namespace is the namespace the command works in: -n, else the
// kubeconfig context's, else "default".
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// clients are the two clients a command may need: a controller-runtime
// client that knows Tend's kinds, and a clientset for logs.
type clients struct {
	client.Client
	core kubernetes.Interface
}

func (o *options) clients() (*clients, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return &clients{Client: c, core: core}, nil
}
