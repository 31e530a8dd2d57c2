package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// statusKinds are the kinds `status` reports on.
var statusKinds = []*kind{kindEtcdCluster, kindPodSet, kindQueue}

func newStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status (KIND/NAME | NAME)",
		Short: "Explain an EtcdCluster, PodSet or Queue at a glance",
		Long: `Explain an EtcdCluster, PodSet or Queue: its readiness, key figures,
members or pods, certificates, recent backups, conditions and last warning
Events. A bare NAME works when only one of the kinds has it.`,
		Example: `  kubectl tend status etcdcluster/demo
  kubectl tend status demo -o yaml`,
		GroupID:           groupInspect,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(statusKinds...),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output must be json or yaml, not %q", output)
			}
			st, err := o.status(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printStatus(o.streams.Out, st, output, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml; the default is a report for people")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// status gathers what the report of the object arg names needs.
func (o *options) status(ctx context.Context, arg string) (Status, error) {
	cs, err := o.clients()
	if err != nil {
		return Status{}, err
	}
	ns, err := o.namespace()
	if err != nil {
		return Status{}, err
	}
	t, err := resolve(ctx, cs, ns, arg, statusKinds)
	if err != nil {
		return Status{}, err
	}
	uids := map[types.UID]bool{t.obj.GetUID(): true}
	switch obj := t.obj.(type) {
	case *etcdv1alpha1.EtcdCluster:
		pods, err := listPods(ctx, cs, ns, client.MatchingLabels{"etcd.tend.dev/cluster": obj.Name})
		if err != nil {
			return Status{}, err
		}
		var backups etcdv1alpha1.EtcdBackupList
		if err := cs.List(ctx, &backups, client.InNamespace(ns)); err != nil {
			return Status{}, fmt.Errorf("listing EtcdBackups: %w", err)
		}
		var own []etcdv1alpha1.EtcdBackup
		for _, b := range backups.Items {
			if b.Spec.ClusterRef.Name == obj.Name {
				own = append(own, b)
				uids[b.UID] = true
			}
		}
		for _, p := range pods {
			uids[p.UID] = true
		}
		warnings, err := warningsOf(ctx, cs, ns, uids)
		if err != nil {
			return Status{}, err
		}
		return EtcdClusterStatus(obj, pods, own, warnings), nil
	case *appsv1alpha1.PodSet:
		all, err := listPods(ctx, cs, ns, nil)
		if err != nil {
			return Status{}, err
		}
		var pods []corev1.Pod
		for _, p := range all {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == obj.UID {
				pods = append(pods, p)
				uids[p.UID] = true
			}
		}
		warnings, err := warningsOf(ctx, cs, ns, uids)
		if err != nil {
			return Status{}, err
		}
		return PodSetStatus(obj, pods, warnings), nil
	case *sqsv1alpha1.Queue:
		warnings, err := warningsOf(ctx, cs, ns, uids)
		if err != nil {
			return Status{}, err
		}
		return QueueStatus(obj, warnings), nil
	}
	return Status{}, fmt.Errorf("no report for %s", t.kind.Name)
}

func listPods(ctx context.Context, cs *clients, ns string, labels client.MatchingLabels) ([]corev1.Pod, error) {
	var pods corev1.PodList
	opts := []client.ListOption{client.InNamespace(ns)}
	if labels != nil {
		opts = append(opts, labels)
	}
	if err := cs.List(ctx, &pods, opts...); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return pods.Items, nil
}

// warningsOf lists the warning Events in ns of the objects in uids.
func warningsOf(ctx context.Context, cs *clients, ns string, uids map[types.UID]bool) ([]corev1.Event, error) {
	var events corev1.EventList
	sel := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("type", corev1.EventTypeWarning)}
	if err := cs.List(ctx, &events, client.InNamespace(ns), sel); err != nil {
		return nil, fmt.Errorf("listing Events: %w", err)
	}
	var out []corev1.Event
	for _, e := range events.Items {
		if uids[e.InvolvedObject.UID] {
			out = append(out, e)
		}
	}
	return out, nil
}

// printStatus writes st as JSON, YAML, or (output "") the report for
// people, with ages counted to now.
func printStatus(w io.Writer, st Status, output string, now time.Time) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	age := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return duration.HumanDuration(now.Sub(t))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s\n", st.Kind, st.Namespace, st.Name)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Ready:\t%s\n", st.Ready)
	if st.Summary != "" {
		fmt.Fprintf(tw, "\t%s\n", st.Summary)
	}
	for _, f := range st.Facts {
		fmt.Fprintf(tw, "%s:\t%s\n", f.Label, f.Value)
	}
	_ = tw.Flush()
	table := func(title string, header string, rows [][]string) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s\n", title)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, header)
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		_ = tw.Flush()
	}
	var rows [][]string
	for _, m := range st.Members {
		since := "-"
		if m.Since != nil {
			since = age(m.Since.Time)
		}
		rows = append(rows, []string{m.Name, m.Role, m.Health, orDash(m.Version), orDash(m.DBSize), since, fmt.Sprint(m.Restarts)})
	}
	table("Members:", "NAME\tROLE\tHEALTH\tVERSION\tDB SIZE\tSINCE\tRESTARTS", rows)
	rows = nil
	for _, p := range st.Pods {
		role := ""
		if p.Leader {
			role = "leader"
		}
		rows = append(rows, []string{p.Name, p.Phase, fmt.Sprint(p.Ready), orDash(role), orDash(p.Node), fmt.Sprint(p.Restarts), age(p.Created.Time)})
	}
	table("Pods:", "NAME\tPHASE\tREADY\tROLE\tNODE\tRESTARTS\tAGE", rows)
	if r := st.Roll; r != nil {
		fmt.Fprintf(&b, "\nRoll in progress (%s): %s -> %s, started %s ago; updated %s; pending %s",
			r.Cause, r.From, r.To, age(r.StartedAt.Time), orNone(r.UpdatedMembers), orNone(r.PendingMembers))
		if r.Member != "" {
			fmt.Fprintf(&b, "; restarting %s", r.Member)
		}
		fmt.Fprintln(&b)
	}
	if r := st.Recovery; r != nil {
		fmt.Fprintf(&b, "\nRecovery (%s): %s, started %s ago. %s\n  %s\n", r.Kind, r.Phase, age(r.StartedAt.Time), r.Cause, r.Message)
	}
	rows = nil
	for _, c := range st.Certificates {
		rows = append(rows, []string{c.Secret, c.NotAfter.UTC().Format(time.RFC3339), untilOf(now, c.NotAfter.Time)})
	}
	table("Certificates:", "SECRET\tEXPIRES\tIN", rows)
	rows = nil
	for _, bk := range st.Backups {
		completed, size, rev := "-", "-", "-"
		if bk.Completed != nil {
			completed = age(bk.Completed.Time) + " ago"
		}
		if bk.SizeBytes > 0 {
			size = humanBytes(bk.SizeBytes)
		}
		if bk.Revision > 0 {
			rev = fmt.Sprint(bk.Revision)
		}
		rows = append(rows, []string{bk.Name, bk.Phase, completed, size, rev, bk.Verification})
	}
	table(fmt.Sprintf("Backups (newest %d):", maxBackups), "NAME\tPHASE\tCOMPLETED\tSIZE\tREVISION\tVERIFICATION", rows)
	rows = nil
	for _, c := range st.Conditions {
		rows = append(rows, []string{c.Type, c.Status, c.Reason, age(c.Since.Time), c.Message})
	}
	table("Conditions:", "TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE", rows)
	rows = nil
	for _, e := range st.Warnings {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		rows = append(rows, []string{age(e.Time.Time) + " ago", e.Object, e.Reason, e.Message + count})
	}
	if len(rows) == 0 {
		fmt.Fprintln(&b, "\nNo warning Events.")
	}
	table(fmt.Sprintf("Warning Events (newest %d):", maxWarnings), "LAST SEEN\tOBJECT\tREASON\tMESSAGE", rows)
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

// untilOf says how long until t, or "expired".
func untilOf(now, t time.Time) string {
	if !t.After(now) {
		return "expired"
	}
	return duration.HumanDuration(t.Sub(now))
}
