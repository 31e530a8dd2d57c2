package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func newDefragCommand(o *options) *cobra.Command {
	var w waitFlags
	cmd := &cobra.Command{
		Use:   "defrag CLUSTER",
		Short: "Defragment every member of an EtcdCluster, one at a time",
		Long: `Ask the operator for one defragmentation round of every member of
CLUSTER: it sets the annotation etcd.tend.dev/defragment to the time now.
The operator starts the round when nothing else runs and every member is
healthy: the followers first, then the leader, after it handed its
leadership to a member already done. status.maintenance.defragmentation
shows each member's sizes before and after; --wait waits for the round to
complete (or stall).`,
		Example:           `  kubectl tend defrag demo --wait`,
		GroupID:           groupAct,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(kindEtcdCluster),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cs, c, err := o.clusterNamed(ctx, args[0])
			if err != nil {
				return err
			}
			request, patch := DefragPatch(time.Now())
			if err := cs.Patch(ctx, c, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("annotating EtcdCluster %s: %w", c.Name, err)
			}
			fmt.Fprintf(o.streams.Out, "etcdcluster.etcd.tend.dev/%s: defragmentation asked (%s=%s)\n", c.Name, etcdv1alpha1.AnnotationDefragment, request)
			if !w.wait {
				return nil
			}
			return waitDefrag(ctx, cs, c, request, w.timeout, func(msg string) { fmt.Fprintln(o.streams.Out, msg) })
		},
	}
	w.bind(cmd, "round")
	return cmd
}

// DefragPatch is the merge patch that asks for a defragmentation round at
// now, and the request it carries.
func DefragPatch(now time.Time) (string, []byte) {
	request := now.UTC().Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{etcdv1alpha1.AnnotationDefragment: request}}})
	return request, patch
}

// waitDefrag waits until the round that answers request completes, or
// fails when it stalls.
func waitDefrag(ctx context.Context, cs client.Client, c *etcdv1alpha1.EtcdCluster, request string, timeout time.Duration, say func(string)) error {
	seen := 0
	var outcome error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cs.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return false, err
		}
		m := c.Status.Maintenance
		if m == nil || m.Defragmentation == nil || m.Defragmentation.Request != request {
			return false, nil
		}
		round := m.Defragmentation
		for ; seen < len(round.Results); seen++ {
			r := round.Results[seen]
			say(fmt.Sprintf("%s: %s -> %s in %s", r.Member, r.Before.String(), r.After.String(), r.Duration.Duration))
		}
		switch round.Phase {
		case etcdv1alpha1.DefragmentationCompleted:
			return true, nil
		case etcdv1alpha1.DefragmentationStalled:
			outcome = fmt.Errorf("the round stalled: %s", round.Message)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the defragmentation of %s: %w", c.Name, err)
	}
	return outcome
}
