package plugin

import (
	"cmp"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Version is the plugin's version; the build sets it with
// -ldflags "-X github.com/tend-dev/tend/internal/plugin.Version=...".
var Version = ""

// version is Version, else what the Go build recorded.
func version() string {
	if Version != "" {
		return Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v, rev := info.Main.Version, ""
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			rev = s.Value
		}
	}
	if rev != "" && (v == "" || v == "(devel)") {
		return "devel+" + rev[:min(len(rev), 12)]
	}
	return cmp.Or(v, "unknown")
}

func newVersionCommand(o *options) *cobra.Command {
	var operatorNS string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the operator's image",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(o.streams.Out, "kubectl-tend: %s\n", version())
			cs, err := o.clients()
			if err != nil {
				return err
			}
			var deps appsv1.DeploymentList
			err = cs.List(cmd.Context(), &deps, client.InNamespace(operatorNS), managerLabels)
			switch {
			case err != nil:
				fmt.Fprintf(o.streams.Out, "operator: unknown (%v)\n", err)
			case len(deps.Items) == 0:
				fmt.Fprintf(o.streams.Out, "operator: not found in namespace %s (--operator-namespace)\n", operatorNS)
			default:
				for _, d := range deps.Items {
					for _, c := range d.Spec.Template.Spec.Containers {
						fmt.Fprintf(o.streams.Out, "operator: %s/%s %s\n", d.Namespace, d.Name, c.Image)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&operatorNS, "operator-namespace", defaultOperatorNamespace, "the namespace Tend's manager runs in")
	return cmd
}

// defaultOperatorNamespace is where config/default and the chart install
// the manager.
const defaultOperatorNamespace = "tend-system"

// managerLabels select the manager's Deployment and pods.
var managerLabels = client.MatchingLabels{"app.kubernetes.io/name": "tend", "app.kubernetes.io/component": "manager"}
