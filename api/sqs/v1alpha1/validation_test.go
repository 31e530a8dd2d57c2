package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/testenv"
)

// These tests send Queues to a real apiserver, so they prove what the CRD's
// OpenAPI schema and CEL rules accept, and the messages users read.

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

func queue(ns, name string, mutate func(*sqsv1alpha1.QueueSpec)) *sqsv1alpha1.Queue {
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	return q
}

func TestQueueValidationOnCreate(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name    string
		objName string
		spec    func(*sqsv1alpha1.QueueSpec)
		wantErr string // empty: accepted
	}{
		{name: "minimal", objName: "orders"},
		{name: "every attribute", objName: "all", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.DelaySeconds, s.VisibilityTimeout, s.MessageRetentionPeriod = ptr.To[int32](900), ptr.To[int32](43200), ptr.To[int32](60)
			s.MaximumMessageSize, s.ReceiveMessageWaitTimeSeconds = ptr.To[int32](1048576), ptr.To[int32](20)
			s.SQSManagedSSEEnabled = ptr.To(true)
			s.Policy = &apiextensionsv1.JSON{Raw: []byte(`{"Version":"2012-10-17","Statement":[]}`)}
			s.Tags = map[string]string{"team": "payments"}
			s.PollInterval = &metav1.Duration{Duration: 30 * time.Second}
		}},
		{name: "fifo", objName: "fifo", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.QueueName, s.FIFOQueue, s.ContentBasedDeduplication = "jobs.fifo", true, ptr.To(true)
		}},
		{name: "fifo name from metadata", objName: "events.fifo", spec: func(s *sqsv1alpha1.QueueSpec) { s.FIFOQueue = true }},
		{name: "delay out of range", objName: "d", spec: func(s *sqsv1alpha1.QueueSpec) { s.DelaySeconds = ptr.To[int32](901) },
			wantErr: "spec.delaySeconds: Invalid value: 901: spec.delaySeconds in body should be less than or equal to 900"},
		{name: "retention too short", objName: "r", spec: func(s *sqsv1alpha1.QueueSpec) { s.MessageRetentionPeriod = ptr.To[int32](59) },
			wantErr: "spec.messageRetentionPeriod in body should be greater than or equal to 60"},
		{name: "message size too large", objName: "m", spec: func(s *sqsv1alpha1.QueueSpec) { s.MaximumMessageSize = ptr.To[int32](1048577) },
			wantErr: "spec.maximumMessageSize in body should be less than or equal to 1048576"},
		{name: "fifo flag without suffix", objName: "f1", spec: func(s *sqsv1alpha1.QueueSpec) { s.FIFOQueue = true },
			wantErr: "a FIFO queue's name must end in .fifo"},
		{name: "suffix without fifo flag", objName: "f2", spec: func(s *sqsv1alpha1.QueueSpec) { s.QueueName = "x.fifo" },
			wantErr: "a FIFO queue's name must end in .fifo, and only a FIFO queue's may"},
		{name: "deduplication on a standard queue", objName: "dedup", spec: func(s *sqsv1alpha1.QueueSpec) { s.ContentBasedDeduplication = ptr.To(true) },
			wantErr: "spec.contentBasedDeduplication applies to FIFO queues only"},
		{name: "metadata name with a dot", objName: "my.queue",
			wantErr: "may hold only letters, digits, '-' and '_'"},
		{name: "queue name too long", objName: "long", spec: func(s *sqsv1alpha1.QueueSpec) { s.QueueName = string(make81()) },
			wantErr: "spec.queueName: Too long"},
		{name: "poll interval below the floor", objName: "p", spec: func(s *sqsv1alpha1.QueueSpec) { s.PollInterval = &metav1.Duration{Duration: 10 * time.Second} },
			wantErr: "pollInterval must be at least 30s"},
		{name: "redrive with both targets", objName: "rd1", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.Redrive = &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "dlq"},
				DeadLetterTargetARN: "arn:aws:sqs:us-east-1:123456789012:dlq", MaxReceiveCount: 3}
		}, wantErr: "set exactly one of redrive.deadLetterQueueRef and redrive.deadLetterTargetARN"},
		{name: "redrive with a bad ARN", objName: "rd2", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.Redrive = &sqsv1alpha1.Redrive{DeadLetterTargetARN: "arn:aws:sns:us-east-1:123456789012:topic", MaxReceiveCount: 3}
		}, wantErr: "spec.redrive.deadLetterTargetARN in body should match"},
		{name: "redrive count zero", objName: "rd3", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.Redrive = &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "dlq"}}
		}, wantErr: "spec.redrive.maxReceiveCount in body should be greater than or equal to 1"},
		{name: "reserved tag", objName: "t", spec: func(s *sqsv1alpha1.QueueSpec) { s.Tags = map[string]string{"tend.dev/owner": "me"} },
			wantErr: "tag keys starting with aws: or tend.dev/ are reserved"},
		{name: "policy that is not an object", objName: "pol", spec: func(s *sqsv1alpha1.QueueSpec) {
			s.Policy = &apiextensionsv1.JSON{Raw: []byte(`"allow everything"`)}
		}, wantErr: `spec.policy: Invalid value: "string": spec.policy in body must be of type object`},
		{name: "metadata name of 63 characters", objName: strings.Repeat("q", 63)},
		{name: "metadata name of 64 characters", objName: strings.Repeat("q", 64),
			wantErr: "a Queue's name is at most 63 characters: its ConfigMap carries it in the label sqs.tend.dev/queue"},
		{name: "unknown deletion policy", objName: "dp", spec: func(s *sqsv1alpha1.QueueSpec) { s.DeletionPolicy = "Orphan" },
			wantErr: `spec.deletionPolicy: Unsupported value: "Orphan": supported values: "Delete", "Retain"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), queue(ns, tt.objName, tt.spec))
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func make81() []byte {
	b := make([]byte, 81)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

func TestQueueDefaults(t *testing.T) {
	g := NewWithT(t)
	q := queue(env.Namespace(t), "defaults", nil)
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Expect(q.Spec.DeletionPolicy).To(Equal(sqsv1alpha1.DeletionPolicyDelete))
	g.Expect(q.Spec.Adoption).To(Equal(sqsv1alpha1.AdoptionNone))
	g.Expect(q.Spec.PollInterval.Duration).To(Equal(5 * time.Minute))
	g.Expect(q.SQSName()).To(Equal("defaults"))
}

func TestQueueImmutableFields(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name    string
		before  func(*sqsv1alpha1.QueueSpec)
		change  func(*sqsv1alpha1.QueueSpec)
		wantErr string
	}{
		{name: "rename", before: func(s *sqsv1alpha1.QueueSpec) { s.QueueName = "a" },
			change: func(s *sqsv1alpha1.QueueSpec) { s.QueueName = "b" }, wantErr: "spec.queueName is immutable"},
		{name: "name set later", change: func(s *sqsv1alpha1.QueueSpec) { s.QueueName = "other" },
			wantErr: "spec.queueName is immutable"},
		{name: "fifo flipped", before: func(s *sqsv1alpha1.QueueSpec) { s.QueueName, s.FIFOQueue = "f.fifo", true },
			change: func(s *sqsv1alpha1.QueueSpec) { s.QueueName, s.FIFOQueue = "f.fifo", false }, wantErr: "spec.fifoQueue is immutable"},
		{name: "attributes may change", change: func(s *sqsv1alpha1.QueueSpec) { s.DelaySeconds = ptr.To[int32](5) }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			q := queue(ns, "q"+string(rune('a'+i)), tt.before)
			g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
			tt.change(&q.Spec)
			err := env.Client.Update(context.Background(), q)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}
