package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/names"
)

// fieldManager is who the plugin's writes are from, in managedFields.
const fieldManager = "kubectl-tend"

// waitFlags are --wait and --timeout.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) bind(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "wait until the "+what+" is Ready, or has failed")
	cmd.Flags().DurationVar(&w.timeout, "timeout", 15*time.Minute, "how long --wait waits")
}

func newBackupCommand(o *options) *cobra.Command {
	var name string
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Back up an EtcdCluster now, to its spec.backup destination",
		Long: `Create an EtcdBackup of CLUSTER, to the destination and with the
compression of the cluster's spec.backup. The operator takes and verifies it;
--wait waits for that.`,
		Example:           `  kubectl tend backup demo --wait`,
		GroupID:           groupAct,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(kindEtcdCluster),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cs, c, err := o.clusterNamed(ctx, args[0])
			if err != nil {
				return err
			}
			b, err := BackupFor(c, name, time.Now())
			if err != nil {
				return err
			}
			if err := cs.Create(ctx, b, client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("creating EtcdBackup %s: %w", b.Name, err)
			}
			fmt.Fprintf(o.streams.Out, "etcdbackup.etcd.tend.dev/%s created\n", b.Name)
			if !w.wait {
				return nil
			}
			return o.waitReady(ctx, cs, b, w.timeout)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the EtcdBackup's name (default CLUSTER-YYYYMMDDHHMMSS)")
	w.bind(cmd, "backup")
	return cmd
}

// BackupFor is the EtcdBackup that `backup` creates of c: to c's backup
// destination, named name or after c and now.
func BackupFor(c *etcdv1alpha1.EtcdCluster, name string, now time.Time) (*etcdv1alpha1.EtcdBackup, error) {
	if c.Spec.Backup == nil {
		return nil, fmt.Errorf("EtcdCluster %s/%s has no spec.backup.destination; set one, or create an EtcdBackup with its own destination (docs/etcdbackup.md)", c.Namespace, c.Name)
	}
	if name == "" {
		name = names.Child(c.Name, "-"+now.UTC().Format("20060102150405"), names.EtcdBackup)
	}
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: c.Name},
			BackupOptions: etcdv1alpha1.BackupOptions{
				Destination: *c.Spec.Backup.Destination.DeepCopy(),
				Compression: c.Spec.Backup.Compression,
			},
		},
	}, nil
}

func newRestoreCommand(o *options) *cobra.Command {
	var name, backup, toTime string
	var toRevision int64
	var confirm, toLatest bool
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "restore CLUSTER (--backup BACKUP | --to-revision N | --to-time T | --to-latest)",
		Short: "Restore an EtcdCluster's data from one of its EtcdBackups, or to a point of its archive",
		Long: `Create an EtcdRestore that replaces every member's data of CLUSTER with
the snapshot of BACKUP, a Complete EtcdBackup in the same namespace, or, with
--to-revision, --to-time or --to-latest, with the cluster's data at that point
of its continuous archive (spec.archive): the operator restores the newest
base backup at or before it (or BACKUP) and replays the archive onto it. What
the cluster holds now is lost, so --confirm-overwrite is required. The
operator stops the members, restores and restarts them; --wait waits for that.`,
		Example: `  kubectl tend restore demo --backup demo-20261125031500 --confirm-overwrite --wait
  kubectl tend restore demo --to-time 2026-11-28T14:03:00Z --confirm-overwrite --wait`,
		GroupID:           groupAct,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(kindEtcdCluster),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !confirm {
				return errors.New("a restore replaces all of the cluster's data: add --confirm-overwrite to go on")
			}
			target, err := ParseTarget(toRevision, toTime, toLatest)
			if err != nil {
				return err
			}
			if target == nil && backup == "" {
				return errors.New("say what to restore: --backup, or a point of the archive with --to-revision, --to-time or --to-latest")
			}
			cs, ns, err := o.clientsIn()
			if err != nil {
				return err
			}
			var r *etcdv1alpha1.EtcdRestore
			if backup == "" {
				r = PointRestoreFor(ns, args[0], target, name, time.Now())
			} else {
				bk := &etcdv1alpha1.EtcdBackup{}
				if err := cs.Get(ctx, client.ObjectKey{Namespace: ns, Name: backup}, bk); err != nil {
					return fmt.Errorf("reading EtcdBackup %s/%s: %w", ns, backup, err)
				}
				if r, err = RestoreFor(args[0], bk, name, time.Now()); err != nil {
					return err
				}
				r.Spec.Target = target
			}
			if err := cs.Create(ctx, r, client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("creating EtcdRestore %s: %w", r.Name, err)
			}
			fmt.Fprintf(o.streams.Out, "etcdrestore.etcd.tend.dev/%s created\n", r.Name)
			if !w.wait {
				return nil
			}
			return o.waitReady(ctx, cs, r, w.timeout)
		},
	}
	cmd.Flags().StringVar(&backup, "backup", "", "the EtcdBackup to restore from (with a --to flag: the base the archive is replayed onto)")
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "restore to this revision of the cluster's archive")
	cmd.Flags().StringVar(&toTime, "to-time", "", "restore every revision the archive received at or before this time (RFC 3339)")
	cmd.Flags().BoolVar(&toLatest, "to-latest", false, "restore to the newest revision the archive holds")
	cmd.Flags().BoolVar(&confirm, "confirm-overwrite", false, "confirm that the cluster's current data is to be replaced")
	cmd.Flags().StringVar(&name, "name", "", "the EtcdRestore's name (default CLUSTER-restore-YYYYMMDDHHMMSS)")
	_ = cmd.RegisterFlagCompletionFunc("backup", o.completeNames(kindBackup))
	w.bind(cmd, "restore")
	return cmd
}

// RestoreFor is the EtcdRestore that `restore` creates: cluster's data
// from backup, which must be a Complete backup of that cluster.
func RestoreFor(cluster string, backup *etcdv1alpha1.EtcdBackup, name string, now time.Time) (*etcdv1alpha1.EtcdRestore, error) {
	if backup.Spec.ClusterRef.Name != cluster {
		return nil, fmt.Errorf("EtcdBackup %s is of EtcdCluster %s, not %s; to restore another cluster's backup, create an EtcdRestore yourself (docs/etcdrestore.md)",
			backup.Name, backup.Spec.ClusterRef.Name, cluster)
	}
	if !apimeta.IsStatusConditionTrue(backup.Status.Conditions, etcdv1alpha1.BackupComplete) {
		return nil, fmt.Errorf("EtcdBackup %s is not Complete (phase %q): only a complete backup can be restored", backup.Name, backup.Status.Phase)
	}
	if name == "" {
		name = names.Child(cluster, "-restore-"+now.UTC().Format("20060102150405"), names.EtcdRestore)
	}
	return &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: backup.Namespace, Name: name},
		Spec: etcdv1alpha1.EtcdRestoreSpec{
			ClusterRef:       etcdv1alpha1.ClusterReference{Name: cluster},
			BackupRef:        &corev1.LocalObjectReference{Name: backup.Name},
			ConfirmOverwrite: true,
		},
	}, nil
}

// ParseTarget reads restore's point flags: at most one of a revision, a
// time and the newest revision; nil when none is set.
func ParseTarget(revision int64, at string, latest bool) (*etcdv1alpha1.RestoreTarget, error) {
	set := 0
	for _, on := range []bool{revision != 0, at != "", latest} {
		if on {
			set++
		}
	}
	switch {
	case set > 1:
		return nil, errors.New("give one of --to-revision, --to-time and --to-latest")
	case revision < 0:
		return nil, fmt.Errorf("--to-revision %d: a revision is positive", revision)
	case revision > 0:
		return &etcdv1alpha1.RestoreTarget{Revision: revision}, nil
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return nil, fmt.Errorf("--to-time %q is not an RFC 3339 time, such as 2026-11-28T14:03:00Z: %w", at, err)
		}
		return &etcdv1alpha1.RestoreTarget{Time: &metav1.Time{Time: t}}, nil
	case latest:
		return &etcdv1alpha1.RestoreTarget{}, nil
	}
	return nil, nil
}

// PointRestoreFor is the EtcdRestore that `restore --to-…` creates without
// --backup: cluster's data at target of its archive, from the base the
// operator picks.
func PointRestoreFor(namespace, cluster string, target *etcdv1alpha1.RestoreTarget, name string, now time.Time) *etcdv1alpha1.EtcdRestore {
	if name == "" {
		name = names.Child(cluster, "-restore-"+now.UTC().Format("20060102150405"), names.EtcdRestore)
	}
	return &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: etcdv1alpha1.EtcdRestoreSpec{
			ClusterRef:       etcdv1alpha1.ClusterReference{Name: cluster},
			Target:           target,
			ConfirmOverwrite: true,
		},
	}
}

// pauseKinds are the kinds `pause` and `resume` work on.
var pauseKinds = []*kind{kindEtcdCluster, kindPodSet, kindQueue, kindSchedule}

func newPauseCommand(o *options, pause bool) *cobra.Command {
	use, short := "pause", "Stop the operator from changing a resource"
	if !pause {
		use, short = "resume", "Let the operator act on a paused resource again"
	}
	return &cobra.Command{
		Use:   use + " (KIND/NAME | NAME)",
		Short: short,
		Long: short + `: an EtcdCluster, PodSet, Queue or
EtcdBackupSchedule. It sets an EtcdCluster's spec.paused or a schedule's
spec.suspend, and the annotation tend.dev/paused=true on a PodSet or Queue,
by a merge patch; nothing else changes. While paused the operator creates,
deletes and repairs nothing (a Queue's deletion still applies its policy),
and the status says so.`,
		Example:           "  kubectl tend " + use + " etcdcluster/demo",
		GroupID:           groupAct,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(pauseKinds...),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cs, ns, err := o.clientsIn()
			if err != nil {
				return err
			}
			t, err := resolve(ctx, cs, ns, args[0], pauseKinds)
			if err != nil {
				return err
			}
			patch, done := PausePatch(t.obj, pause)
			resource := lowerKind(t.kind) + "/" + t.obj.GetName()
			if done {
				fmt.Fprintf(o.streams.Out, "%s already %sd\n", resource, use)
				return nil
			}
			if err := cs.Patch(ctx, t.obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("patching %s: %w", resource, err)
			}
			fmt.Fprintf(o.streams.Out, "%s %sd\n", resource, use)
			return nil
		},
	}
}

// pausedAnnotation is AnnotationPaused of apps.tend.dev and sqs.tend.dev,
// the same key.
const pausedAnnotation = appsv1alpha1.AnnotationPaused

// PausePatch is the merge patch that pauses (or resumes) obj, and whether
// obj is so already.
func PausePatch(obj client.Object, pause bool) ([]byte, bool) {
	switch o := obj.(type) {
	case *etcdv1alpha1.EtcdCluster:
		return fmt.Appendf(nil, `{"spec":{"paused":%t}}`, pause), o.Spec.Paused == pause
	case *etcdv1alpha1.EtcdBackupSchedule:
		return fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, pause), o.Spec.Suspend == pause
	}
	paused := obj.GetAnnotations()[pausedAnnotation] == "true"
	if pause {
		return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, pausedAnnotation), paused
	}
	_, present := obj.GetAnnotations()[pausedAnnotation]
	return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, pausedAnnotation), !present
}

// waitReady polls obj until its Ready condition is True for its
// generation, or it is Stalled, or timeout passes; it prints each new
// reason on the way.
func (o *options) waitReady(ctx context.Context, cs *clients, obj client.Object, timeout time.Duration) error {
	key := client.ObjectKeyFromObject(obj)
	last := ""
	var result error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cs.Get(ctx, key, obj); err != nil {
			return false, fmt.Errorf("reading %s: %w", key, err)
		}
		conds := conditionsOfObject(obj)
		ready := apimeta.FindStatusCondition(conds, "Ready")
		if ready != nil && ready.ObservedGeneration == obj.GetGeneration() {
			if line := fmt.Sprintf("%s: %s", ready.Reason, ready.Message); line != last {
				fmt.Fprintf(o.streams.ErrOut, "  %s\n", line)
				last = line
			}
			if ready.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		if stalled := apimeta.FindStatusCondition(conds, "Stalled"); stalled != nil && stalled.Status == metav1.ConditionTrue {
			result = fmt.Errorf("%s stalled: %s: %s", key.Name, stalled.Reason, stalled.Message)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be Ready: %w", key.Name, err)
	}
	if result != nil {
		return result
	}
	fmt.Fprintf(o.streams.Out, "%s is Ready\n", key.Name)
	return nil
}

// conditionsOfObject reads the conditions of the kinds the plugin waits on.
func conditionsOfObject(obj client.Object) []metav1.Condition {
	switch o := obj.(type) {
	case *etcdv1alpha1.EtcdBackup:
		return o.Status.Conditions
	case *etcdv1alpha1.EtcdRestore:
		return o.Status.Conditions
	}
	return nil
}

// clusterNamed reads the EtcdCluster name in the command's namespace,
// and returns the clients that read it.
func (o *options) clusterNamed(ctx context.Context, name string) (*clients, *etcdv1alpha1.EtcdCluster, error) {
	cs, ns, err := o.clientsIn()
	if err != nil {
		return nil, nil, err
	}
	c := &etcdv1alpha1.EtcdCluster{}
	if err := cs.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return nil, nil, fmt.Errorf("reading EtcdCluster %s/%s: %w", ns, name, err)
	}
	return cs, c, nil
}

// clientsIn is clients() and namespace() together.
func (o *options) clientsIn() (*clients, string, error) {
	cs, err := o.clients()
	if err != nil {
		return nil, "", err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, "", err
	}
	return cs, ns, nil
}
