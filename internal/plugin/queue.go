package plugin

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// newQueueCommand is `kubectl tend queue`, the Queue's own actions.
func newQueueCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "queue",
		Short:   "Act on a Queue: redrive its dead-letter messages",
		GroupID: groupAct,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRedriveCommand(o))
	return cmd
}

func newRedriveCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "redrive NAME",
		Short: "Move a dead-letter Queue's messages back to their source queues",
		Long: `Ask the operator to move the messages of NAME, a dead-letter Queue, back to
the queues they came from, with an SQS message move task. The plugin only
sets the annotation sqs.tend.dev/redrive to the current time; the operator
starts the task and reports its progress in status.redrive, which
kubectl tend status queue/NAME shows. A Queue with managementPolicy Observe
refuses it.`,
		Example:           "  kubectl tend queue redrive orders-dlq\n  kubectl tend status queue/orders-dlq",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(kindQueue),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cs, ns, err := o.clientsIn()
			if err != nil {
				return err
			}
			q := &sqsv1alpha1.Queue{}
			if err := cs.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, q); err != nil {
				return fmt.Errorf("reading Queue %s/%s: %w", ns, args[0], err)
			}
			patch, err := RedrivePatch(q, time.Now())
			if err != nil {
				return err
			}
			if err := cs.Patch(ctx, q, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager)); err != nil {
				return fmt.Errorf("patching queue/%s: %w", q.Name, err)
			}
			fmt.Fprintf(o.streams.Out, "queue/%s redrive requested; kubectl tend status queue/%s shows its progress\n", q.Name, q.Name)
			return nil
		},
	}
}

// RedrivePatch is the merge patch that asks the operator for a message
// move of q, stamped with now; an error says why it cannot be asked.
func RedrivePatch(q *sqsv1alpha1.Queue, now time.Time) ([]byte, error) {
	switch {
	case q.Observed():
		return nil, fmt.Errorf("the Queue %s has managementPolicy Observe: Tend changes nothing in its queue, messages included", q.Name)
	case q.Status.QueueARN == "":
		return nil, fmt.Errorf("the Queue %s has no queue in SQS yet (status.queueARN is empty): wait until it is Ready", q.Name)
	case q.Status.Redrive != nil && (q.Status.Redrive.State == "RUNNING" || q.Status.Redrive.State == "CANCELLING"):
		return nil, errors.New("a message move of the Queue " + q.Name + " is still " + q.Status.Redrive.State + ": wait until it ends")
	}
	return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, sqsv1alpha1.AnnotationRedrive, now.UTC().Format(time.RFC3339)), nil
}

// queueMessages writes a Queue's depth for status: "-" before the first poll.
func queueMessages(m *sqsv1alpha1.QueueMessages) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("%d visible, %d in flight, %d delayed", m.Visible, m.InFlight, m.Delayed)
}

// RedriveProgress writes a message move's state for status.
func RedriveProgress(st *sqsv1alpha1.RedriveStatus) string {
	out := st.State
	if st.MessagesToMove > 0 || st.MessagesMoved > 0 {
		out += fmt.Sprintf(": %d of %d messages moved", st.MessagesMoved, st.MessagesToMove)
	}
	out += " (asked " + st.Request + ")"
	if st.Message != "" {
		out += ": " + st.Message
	}
	return out
}
