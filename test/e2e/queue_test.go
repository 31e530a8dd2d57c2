//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// The in-cluster operator keeps a real SQS queue (moto_server on the node
// address) in line with its Queue: it creates it, publishes its URL for
// pods, brings it back after an out-of-band delete, and deletes it with the
// Queue.
func TestQueueLifecycleInCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	api := motoSQS()
	name := fmt.Sprintf("e2e-orders-%d", rand.Uint32())

	q := &sqsv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: sqsv1alpha1.QueueSpec{
			QueueName:    name,
			Tags:         map[string]string{"team": "e2e"},
			PollInterval: &metav1.Duration{Duration: 30 * time.Second},
		},
	}
	if err := cluster.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	cluster.WaitReady(t, time.Minute, ns, "queue/"+q.Name) // kubectl wait, as scripts do
	url := waitQueueReady(t, q)

	// A pod reads the published URL from the ConfigMap and sends a message
	// over the cluster network. busybox cannot sign a request; moto accepts
	// any signature but routes by the service that the credential scope of
	// the Authorization header names.
	sender := cluster.BusyboxPod(ns, "sender",
		`wget -qO- --header "Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0" `+
			`--post-data "Action=SendMessage&Version=2012-11-05&MessageBody=hello-from-a-pod" "$queueURL"`)
	sender.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{
		ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "orders-queue"}},
	}}
	if err := cluster.Client.Create(ctx, sender); err != nil {
		t.Fatal(err)
	}
	cluster.WaitForPodPhase(t, ns, "sender", corev1.PodSucceeded)
	got, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || awssdk.ToString(got.Messages[0].Body) != "hello-from-a-pod" {
		t.Fatalf("the queue holds %v, want the pod's message", got.Messages)
	}

	// Deleted behind the operator's back, the queue comes back by the next
	// poll (30s give or take 10%).
	if _, err := api.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, 2*time.Minute, "the queue to be re-created", func(ctx context.Context) (bool, error) {
		out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		if err != nil {
			return false, err
		}
		tags, err := api.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})
		if err != nil {
			return false, err
		}
		return out.Attributes != nil && tags.Tags["team"] == "e2e", nil
	})

	// Deleting the Queue deletes the SQS queue, then lets the Queue go.
	if err := cluster.Client.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, time.Minute, "the Queue and its SQS queue to be deleted", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(q), &sqsv1alpha1.Queue{})
		if client.IgnoreNotFound(err) != nil || err == nil {
			return false, err
		}
		_, err = api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		var missing *sqstypes.QueueDoesNotExist
		switch {
		case err == nil:
			return false, fmt.Errorf("the SQS queue %s still exists", name)
		case errors.As(err, &missing) || strings.Contains(err.Error(), "NonExistentQueue"):
			return true, nil
		default:
			return false, err
		}
	})
}

// waitQueueReady waits for q to be Ready and returns its URL.
func waitQueueReady(t *testing.T, q *sqsv1alpha1.Queue) string {
	t.Helper()
	var url string
	cluster.WaitFor(t, time.Minute, "the Queue to be Ready", func(ctx context.Context) (bool, error) {
		got := &sqsv1alpha1.Queue{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(q), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, sqsv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Errorf("Ready is %v", c)
		}
		url = got.Status.QueueURL
		return url != "", nil
	})
	return url
}

// motoSQS is the test's own SQS client, on the same moto the operator uses.
func motoSQS() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: awssdk.String(cluster.Settings.MotoURL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}
