package queue

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/statemetrics"
)

func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	synced := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "orders"}}
	setSynced(synced, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
	failing := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "orders"}}
	setSynced(failing, metav1.ConditionFalse, sqsv1alpha1.ReasonCredentialsError, "AccessDenied")
	fresh := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: "orders"}}
	synced.Spec.Redrive = &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "orders-dlq"}, MaxReceiveCount: 3}
	dlq := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "orders-dlq"}}
	dlq.Status.Messages = &sqsv1alpha1.QueueMessages{Visible: 12, InFlight: 1}
	r := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(synced, failing, fresh, dlq).Build()
	err := testutil.CollectAndCompare(statemetrics.NewCollector(r, Metrics), strings.NewReader(`
# HELP tend_queue_synced 1 when the last exchange with SQS for a Queue succeeded (its Synced condition is True), else 0.
# TYPE tend_queue_synced gauge
tend_queue_synced{name="orders",namespace="a"} 1
tend_queue_synced{name="orders",namespace="b"} 0
tend_queue_synced{name="orders",namespace="c"} 0
tend_queue_synced{name="orders-dlq",namespace="a"} 0
# HELP tend_queue_messages A Queue's approximate depth as SQS reported it at the last poll: state is visible, in_flight or delayed.
# TYPE tend_queue_messages gauge
tend_queue_messages{name="orders-dlq",namespace="a",state="visible"} 12
tend_queue_messages{name="orders-dlq",namespace="a",state="in_flight"} 1
tend_queue_messages{name="orders-dlq",namespace="a",state="delayed"} 0
# HELP tend_queue_dead_letter 1 for a Queue that another Queue names as its dead-letter queue (spec.redrive.deadLetterQueueRef).
# TYPE tend_queue_dead_letter gauge
tend_queue_dead_letter{name="orders-dlq",namespace="a"} 1
`), "tend_queue_synced", "tend_queue_messages", "tend_queue_dead_letter")
	g.Expect(err).NotTo(HaveOccurred())
}
