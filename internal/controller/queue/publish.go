package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// publish writes the ConfigMap <name>-queue that consumers read the queue's
// name, URL, ARN and region from. An unchanged ConfigMap is not written.
func (r *Reconciler) publish(ctx context.Context, q *sqsv1alpha1.Queue) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name + "-queue"}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if cm.ResourceVersion != "" && !metav1.IsControlledBy(cm, q) {
			// Another's ConfigMap of that name: Tend overwrites only what
			// it made.
			return fmt.Errorf("ConfigMap %s exists but was not made by Tend for this Queue; delete or rename it", cm.Name)
		}
		cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "tend", "sqs.tend.dev/queue": q.Name}
		cm.Data = connectionData(q)
		return controllerutil.SetControllerReference(q, cm, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("publishing the ConfigMap %s: %w", cm.Name, err)
	}
	return nil
}

// connectionData is what the ConfigMap holds: the queue's name, URL, ARN
// and region (from the ARN, so the one SQS reported). Nothing secret: the
// credentials stay in the Secret that the application mounts itself.
func connectionData(q *sqsv1alpha1.Queue) map[string]string {
	data := map[string]string{"queueName": q.SQSName(), "queueURL": q.Status.QueueURL, "queueARN": q.Status.QueueARN}
	if region := regionOf(q.Status.QueueARN); region != "" {
		data["region"] = region
	}
	return data
}
