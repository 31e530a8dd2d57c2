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

// Metrics exports whether each Queue is synced, and its conditions.
var Metrics = statemetrics.Source{
	Descs: []*prometheus.Desc{syncedDesc},
	Collect: func(ctx context.Context, r client.Reader, e *statemetrics.Emitter) error {
		var list sqsv1alpha1.QueueList
		if err := r.List(ctx, &list); err != nil {
			return fmt.Errorf("listing Queues: %w", err)
		}
		for i := range list.Items {
			q := &list.Items[i]
			e.Gauge(syncedDesc, statemetrics.Bool(meta.IsStatusConditionTrue(q.Status.Conditions, sqsv1alpha1.ConditionSynced)), q.Namespace, q.Name)
			e.Conditions("Queue", q, q.Status.Conditions)
		}
		return nil
	},
}
