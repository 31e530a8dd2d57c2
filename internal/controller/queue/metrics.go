package queue

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/statemetrics"
)

var syncedDesc = prometheus.NewDesc("tend_queue_synced",
	"1 when the last exchange with SQS for a Queue succeeded (its Synced condition is True), else 0.",
	[]string{"namespace", "name"}, nil)

var messagesDesc = prometheus.NewDesc("tend_queue_messages",
	"A Queue's approximate depth as SQS reported it at the last poll: state is visible, in_flight or delayed.",
	[]string{"namespace", "name", "state"}, nil)

var deadLetterDesc = prometheus.NewDesc("tend_queue_dead_letter",
	"1 for a Queue that another Queue names as its dead-letter queue (spec.redrive.deadLetterQueueRef).",
	[]string{"namespace", "name"}, nil)

// Metrics exports whether each Queue is synced, its depth, which Queues are
// dead-letter queues, and their conditions. The depth is status's: no call
// to SQS of its own.
var Metrics = statemetrics.Source{
	Descs: []*prometheus.Desc{syncedDesc, messagesDesc, deadLetterDesc},
	Collect: func(ctx context.Context, r client.Reader, e *statemetrics.Emitter) error {
		var list sqsv1alpha1.QueueList
		if err := r.List(ctx, &list); err != nil {
			return fmt.Errorf("listing Queues: %w", err)
		}
		deadLetter := map[[2]string]bool{}
		for i := range list.Items {
			q := &list.Items[i]
			e.Gauge(syncedDesc, statemetrics.Bool(meta.IsStatusConditionTrue(q.Status.Conditions, sqsv1alpha1.ConditionSynced)), q.Namespace, q.Name)
			if m := q.Status.Messages; m != nil {
				e.Gauge(messagesDesc, float64(m.Visible), q.Namespace, q.Name, "visible")
				e.Gauge(messagesDesc, float64(m.InFlight), q.Namespace, q.Name, "in_flight")
				e.Gauge(messagesDesc, float64(m.Delayed), q.Namespace, q.Name, "delayed")
			}
			if rd := q.Spec.Redrive; rd != nil && rd.DeadLetterQueueRef != nil {
				deadLetter[[2]string{q.Namespace, rd.DeadLetterQueueRef.Name}] = true
			}
			e.Conditions("Queue", q, q.Status.Conditions)
		}
		for i := range list.Items {
			if q := &list.Items[i]; deadLetter[[2]string{q.Namespace, q.Name}] {
				e.Gauge(deadLetterDesc, 1, q.Namespace, q.Name)
			}
		}
		return nil
	},
}
