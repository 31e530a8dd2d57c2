package queue

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

func TestDesiredAttributes(t *testing.T) {
	tests := []struct {
		name   string
		spec   sqsv1alpha1.QueueSpec
		dlq    string
		want   map[string]string
		create map[string]string
	}{
		{name: "nothing declared", want: map[string]string{}, create: map[string]string{}},
		{
			name: "numbers and booleans",
			spec: sqsv1alpha1.QueueSpec{
				DelaySeconds: ptr.To[int32](5), VisibilityTimeout: ptr.To[int32](60), MessageRetentionPeriod: ptr.To[int32](3600),
				MaximumMessageSize: ptr.To[int32](2048), ReceiveMessageWaitTimeSeconds: ptr.To[int32](0),
				SQSManagedSSEEnabled: ptr.To(false),
			},
			want: map[string]string{
				"DelaySeconds": "5", "VisibilityTimeout": "60", "MessageRetentionPeriod": "3600",
				"MaximumMessageSize": "2048", "ReceiveMessageWaitTimeSeconds": "0", "SqsManagedSseEnabled": "false",
			},
		},
		{
			name:   "fifo is set on create only",
			spec:   sqsv1alpha1.QueueSpec{FIFOQueue: true, ContentBasedDeduplication: ptr.To(true)},
			want:   map[string]string{"ContentBasedDeduplication": "true"},
			create: map[string]string{"ContentBasedDeduplication": "true", "FifoQueue": "true"},
		},
		{
			name: "policy and redrive",
			spec: sqsv1alpha1.QueueSpec{
				Policy:  &apiextensionsv1.JSON{Raw: []byte(`{"Statement":[]}`)},
				Redrive: &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "dlq"}, MaxReceiveCount: 4},
			},
			dlq: "arn:aws:sqs:us-east-1:123456789012:dlq",
			want: map[string]string{
				"Policy":        `{"Statement":[]}`,
				"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":4}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(desiredAttributes(&tt.spec, tt.dlq)).To(Equal(tt.want))
			if tt.create == nil {
				tt.create = tt.want
			}
			g.Expect(createAttributes(&tt.spec, tt.dlq)).To(Equal(tt.create))
		})
	}
}

func TestAttributeChanges(t *testing.T) {
	tests := []struct {
		name              string
		desired, observed map[string]string
		want              map[string]string
	}{
		{name: "in line", desired: map[string]string{"DelaySeconds": "5"}, observed: map[string]string{"DelaySeconds": "5", "QueueArn": "x"}},
		{name: "drifted", desired: map[string]string{"DelaySeconds": "5", "VisibilityTimeout": "30"},
			observed: map[string]string{"DelaySeconds": "7", "VisibilityTimeout": "30"},
			want:     map[string]string{"DelaySeconds": "5"}},
		{name: "missing on the queue", desired: map[string]string{"Policy": `{"a":1}`}, observed: map[string]string{},
			want: map[string]string{"Policy": `{"a":1}`}},
		{name: "policy in another key order and spacing",
			desired:  map[string]string{"Policy": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sqs:*"}]}`},
			observed: map[string]string{"Policy": `{"Statement": [{"Action": "sqs:*", "Effect": "Allow"}], "Version": "2012-10-17"}`}},
		{name: "policy changed",
			desired:  map[string]string{"Policy": `{"Statement":[{"Effect":"Allow"}]}`},
			observed: map[string]string{"Policy": `{"Statement":[{"Effect":"Deny"}]}`},
			want:     map[string]string{"Policy": `{"Statement":[{"Effect":"Allow"}]}`}},
		{name: "redrive count as a string",
			desired:  map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":4}`},
			observed: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":"4"}`}},
		{name: "redrive count changed",
			desired:  map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":4}`},
			observed: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":"5"}`},
			want:     map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":4}`}},
		{name: "undeclared attributes are left alone", desired: map[string]string{}, observed: map[string]string{"DelaySeconds": "9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(attributeChanges(tt.desired, tt.observed)).To(Equal(tt.want))
		})
	}
}

func TestTags(t *testing.T) {
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}}
	g := NewWithT(t)
	g.Expect(desiredTags(q)).To(Equal(map[string]string{"tend.dev/queue": "ns/q"}))
	q.Spec.Tags = map[string]string{"team": "a"}
	g.Expect(desiredTags(q)).To(Equal(map[string]string{"tend.dev/queue": "ns/q", "team": "a"}))
	g.Expect(q.Spec.Tags).To(HaveLen(1), "desiredTags must not change the spec")

	tests := []struct {
		name              string
		desired, observed map[string]string
		manageAll         bool
		wantSet           map[string]string
		wantRemove        []string
	}{
		{name: "in line", desired: map[string]string{"a": "1"}, observed: map[string]string{"a": "1"}, manageAll: true},
		{name: "changed and missing", desired: map[string]string{"a": "1", "b": "2"}, observed: map[string]string{"a": "0"},
			wantSet: map[string]string{"a": "1", "b": "2"}},
		{name: "extra removed when declared", desired: map[string]string{"a": "1"}, observed: map[string]string{"a": "1", "z": "9", "y": "8"},
			manageAll: true, wantRemove: []string{"y", "z"}},
		{name: "extra kept when undeclared", desired: map[string]string{"a": "1"}, observed: map[string]string{"a": "1", "z": "9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			set, remove := tagChanges(tt.desired, tt.observed, tt.manageAll)
			g.Expect(set).To(Equal(tt.wantSet))
			g.Expect(remove).To(Equal(tt.wantRemove))
		})
	}
}
