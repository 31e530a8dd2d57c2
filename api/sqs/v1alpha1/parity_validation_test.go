package v1alpha1_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// The fields of SSE-KMS, FIFO throughput, redriveAllowPolicy and
// managementPolicy, and the combinations that SQS allows.
func TestQueueParityValidation(t *testing.T) {
	ns := env.Namespace(t)
	fifo := func(s *sqsv1alpha1.QueueSpec) { s.QueueName, s.FIFOQueue = "jobs.fifo", true }
	refs := func(names ...string) []corev1.LocalObjectReference {
		out := make([]corev1.LocalObjectReference, len(names))
		for i, n := range names {
			out[i].Name = n
		}
		return out
	}
	tests := []struct {
		name    string
		spec    func(*sqsv1alpha1.QueueSpec)
		wantErr string // empty: accepted
	}{
		{name: "sse-kms", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.KMSMasterKeyID, s.KMSDataKeyReusePeriodSeconds = "alias/aws/sqs", ptr.To[int32](86400)
		}},
		{name: "sse-kms with sse-sqs off", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.KMSMasterKeyID, s.SQSManagedSSEEnabled = "alias/orders", ptr.To(false)
		}},
		{name: "sse-kms and sse-sqs", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.KMSMasterKeyID, s.SQSManagedSSEEnabled = "alias/orders", ptr.To(true)
		}, wantErr: "spec.kmsMasterKeyId (SSE-KMS) and spec.sqsManagedSSEEnabled (SSE-SQS) exclude each other"},
		{name: "reuse period without a key", spec: func(s *sqsv1alpha1.QueueSpec) { s.KMSDataKeyReusePeriodSeconds = ptr.To[int32](300) },
			wantErr: "spec.kmsDataKeyReusePeriodSeconds applies to SSE-KMS only"},
		{name: "reuse period too short", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.KMSMasterKeyID, s.KMSDataKeyReusePeriodSeconds = "k", ptr.To[int32](59)
		}, wantErr: "spec.kmsDataKeyReusePeriodSeconds in body should be greater than or equal to 60"},
		{name: "reuse period too long", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.KMSMasterKeyID, s.KMSDataKeyReusePeriodSeconds = "k", ptr.To[int32](86401)
		}, wantErr: "spec.kmsDataKeyReusePeriodSeconds in body should be less than or equal to 86400"},
		{name: "fifo high throughput", spec: func(s *sqsv1alpha1.QueueSpec) {
			fifo(s)
			s.DeduplicationScope, s.FIFOThroughputLimit = "messageGroup", "perMessageGroupId"
		}},
		{name: "fifo per queue with message group scope", spec: func(s *sqsv1alpha1.QueueSpec) {
			fifo(s)
			s.DeduplicationScope, s.FIFOThroughputLimit = "messageGroup", "perQueue"
		}},
		{name: "fifo per message group with queue scope", spec: func(s *sqsv1alpha1.QueueSpec) {
			fifo(s)
			s.DeduplicationScope, s.FIFOThroughputLimit = "queue", "perMessageGroupId"
		}, wantErr: "spec.fifoThroughputLimit perMessageGroupId (high throughput) needs spec.deduplicationScope messageGroup"},
		{name: "fifo per message group without scope", spec: func(s *sqsv1alpha1.QueueSpec) {
			fifo(s)
			s.FIFOThroughputLimit = "perMessageGroupId"
		}, wantErr: "needs spec.deduplicationScope messageGroup"},
		{name: "deduplication scope on a standard queue", spec: func(s *sqsv1alpha1.QueueSpec) { s.DeduplicationScope = "queue" },
			wantErr: "spec.deduplicationScope and spec.fifoThroughputLimit apply to FIFO queues only"},
		{name: "throughput limit on a standard queue", spec: func(s *sqsv1alpha1.QueueSpec) { s.FIFOThroughputLimit = "perQueue" },
			wantErr: "apply to FIFO queues only"},
		{name: "unknown deduplication scope", spec: func(s *sqsv1alpha1.QueueSpec) { fifo(s); s.DeduplicationScope = "group" },
			wantErr: `spec.deduplicationScope: Unsupported value: "group"`},
		{name: "allow all", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "allowAll"}
		}},
		{name: "deny all", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "denyAll"}
		}},
		{name: "by queue", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue", SourceQueueRefs: refs("orders"),
				SourceQueueARNs: []string{"arn:aws:sqs:us-east-1:123456789012:legacy"}}
		}},
		{name: "by queue without sources", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue"}
		}, wantErr: "redriveAllowPolicy lists source queues (sourceQueueRefs, sourceQueueARNs) with redrivePermission byQueue, and only then"},
		{name: "allow all with sources", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "allowAll", SourceQueueRefs: refs("orders")}
		}, wantErr: "with redrivePermission byQueue, and only then"},
		{name: "eleven sources", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue",
				SourceQueueRefs: refs("a", "b", "c", "d", "e", "f"), SourceQueueARNs: []string{
					"arn:aws:sqs:us-east-1:123456789012:g", "arn:aws:sqs:us-east-1:123456789012:h", "arn:aws:sqs:us-east-1:123456789012:i",
					"arn:aws:sqs:us-east-1:123456789012:j", "arn:aws:sqs:us-east-1:123456789012:k"}}
		}, wantErr: "redriveAllowPolicy may name at most 10 source queues"},
		{name: "source that is not an SQS ARN", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue", SourceQueueARNs: []string{"arn:aws:sns:us-east-1:123456789012:t"}}
		}, wantErr: "spec.redriveAllowPolicy.sourceQueueARNs[0] in body should match"},
		{name: "unknown permission", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "allowSome"}
		}, wantErr: `spec.redriveAllowPolicy.redrivePermission: Unsupported value: "allowSome"`},
		{name: "observe", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.ManagementPolicy = "Observe"
			s.DeletionPolicy, s.Adoption = "Delete", "None"
		}},
		{name: "observe a fifo queue", spec: func(s *sqsv1alpha1.QueueSpec) { fifo(s); s.ManagementPolicy = "Observe" }},
		{name: "observe with an attribute", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.ManagementPolicy, s.VisibilityTimeout = "Observe", ptr.To[int32](30)
		}, wantErr: "managementPolicy Observe changes nothing in SQS"},
		{name: "observe with tags", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.ManagementPolicy, s.Tags = "Observe", map[string]string{"a": "b"}
		}, wantErr: "managementPolicy Observe changes nothing in SQS"},
		{name: "observe with a policy", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.ManagementPolicy, s.Policy = "Observe", &apiextensionsv1.JSON{Raw: []byte(`{}`)}
		}, wantErr: "managementPolicy Observe changes nothing in SQS"},
		{name: "unknown management policy", spec: func(s *sqsv1alpha1.QueueSpec) { s.ManagementPolicy = "ReadOnly" },
			wantErr: `spec.managementPolicy: Unsupported value: "ReadOnly"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			q := queue(ns, "parity-"+string(rune('a'+i)), tt.spec)
			if q.Spec.QueueName == "jobs.fifo" {
				q.Spec.QueueName = q.Name + ".fifo"
			}
			err := env.Client.Create(context.Background(), q)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestManagementPolicyDefault(t *testing.T) {
	g := NewWithT(t)
	q := queue(env.Namespace(t), "managed", nil)
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Expect(q.Spec.ManagementPolicy).To(Equal(sqsv1alpha1.ManagementPolicyManage))
	g.Expect(q.Observed()).To(BeFalse())
}
