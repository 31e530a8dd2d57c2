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
		srcs   []string
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
		{
			name: "sse-kms",
			spec: sqsv1alpha1.QueueSpec{KMSMasterKeyID: "alias/orders", KMSDataKeyReusePeriodSeconds: ptr.To[int32](600)},
			want: map[string]string{"KmsMasterKeyId": "alias/orders", "KmsDataKeyReusePeriodSeconds": "600"},
		},
		{
			name:   "fifo high throughput",
			spec:   sqsv1alpha1.QueueSpec{FIFOQueue: true, DeduplicationScope: "messageGroup", FIFOThroughputLimit: "perMessageGroupId"},
			want:   map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"},
			create: map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId", "FifoQueue": "true"},
		},
		{
			name: "redrive allowed to all",
			spec: sqsv1alpha1.QueueSpec{RedriveAllowPolicy: &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "allowAll"}},
			want: map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"allowAll"}`},
		},
		{
			name: "redrive denied to all",
			spec: sqsv1alpha1.QueueSpec{RedriveAllowPolicy: &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "denyAll"}},
			want: map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"denyAll"}`},
		},
		{
			name: "redrive by queue, sorted and without duplicates",
			spec: sqsv1alpha1.QueueSpec{RedriveAllowPolicy: &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue",
				SourceQueueRefs: []corev1.LocalObjectReference{{Name: "b"}}, SourceQueueARNs: []string{"arn:aws:sqs:r:1:a"}}},
			srcs: []string{"arn:aws:sqs:r:1:b", "arn:aws:sqs:r:1:a", "arn:aws:sqs:r:1:b"},
			want: map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:r:1:a","arn:aws:sqs:r:1:b"]}`},
		},
		{
			name: "redrive by queue references not resolved yet is left out",
			spec: sqsv1alpha1.QueueSpec{RedriveAllowPolicy: &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue",
				SourceQueueRefs: []corev1.LocalObjectReference{{Name: "b"}}}},
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(desiredAttributes(&tt.spec, tt.dlq, tt.srcs)).To(Equal(tt.want))
			if tt.create == nil {
				tt.create = tt.want
			}
			g.Expect(createAttributes(&tt.spec, tt.dlq, tt.srcs)).To(Equal(tt.create))
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
		{name: "policy with other whitespace and nesting order",
			desired:  map[string]string{"Policy": `{"Version":"2012-10-17","Statement":[{"Sid":"a","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":["sqs:SendMessage"],"Resource":"*"}]}`},
			observed: map[string]string{"Policy": "{\n  \"Statement\" : [ {\n    \"Resource\" : \"*\",\n    \"Action\" : [ \"sqs:SendMessage\" ],\n    \"Principal\" : { \"AWS\" : \"arn:aws:iam::1:root\" },\n    \"Effect\" : \"Allow\",\n    \"Sid\" : \"a\"\n  } ],\n  \"Version\" : \"2012-10-17\"\n}"}},
		{name: "kms key and reuse period in line",
			desired:  map[string]string{"KmsMasterKeyId": "alias/a", "KmsDataKeyReusePeriodSeconds": "300"},
			observed: map[string]string{"KmsMasterKeyId": "alias/a", "KmsDataKeyReusePeriodSeconds": "300"}},
		{name: "kms key drifted",
			desired:  map[string]string{"KmsMasterKeyId": "alias/a"},
			observed: map[string]string{"KmsMasterKeyId": "alias/b"},
			want:     map[string]string{"KmsMasterKeyId": "alias/a"}},
		{name: "fifo throughput drifted",
			desired:  map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"},
			observed: map[string]string{"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perQueue"},
			want:     map[string]string{"FifoThroughputLimit": "perMessageGroupId"}},
		{name: "redrive allow policy with sources in another order",
			desired:  map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"byQueue","sourceQueueArns":["arn:a","arn:b"]}`},
			observed: map[string]string{"RedriveAllowPolicy": `{"sourceQueueArns": ["arn:b", "arn:a"], "redrivePermission": "byQueue"}`}},
		{name: "redrive allow policy removed outside",
			desired:  map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"denyAll"}`},
			observed: map[string]string{},
			want:     map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"denyAll"}`}},
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

func TestSourceQueueARNAndRegion(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sourceQueueARN("arn:aws:sqs:eu-west-1:123456789012:orders-dlq", "orders")).To(Equal("arn:aws:sqs:eu-west-1:123456789012:orders"))
	g.Expect(sourceQueueARN("arn:aws-cn:sqs:cn-north-1:123456789012:d.fifo", "s.fifo")).To(Equal("arn:aws-cn:sqs:cn-north-1:123456789012:s.fifo"))
	g.Expect(sourceQueueARN("", "orders")).To(BeEmpty())
	g.Expect(regionOf("arn:aws:sqs:eu-west-1:123456789012:orders")).To(Equal("eu-west-1"))
	g.Expect(regionOf("")).To(BeEmpty())
	g.Expect(regionOf("not:an:arn")).To(BeEmpty())
}

func TestMessagesAndReportedAttributes(t *testing.T) {
	g := NewWithT(t)
	attrs := map[string]string{
		"ApproximateNumberOfMessages": "7", "ApproximateNumberOfMessagesNotVisible": "2", "ApproximateNumberOfMessagesDelayed": "1",
		"QueueArn": "arn:x", "DelaySeconds": "0", "CreatedTimestamp": "1", "LastModifiedTimestamp": "2",
	}
	g.Expect(messagesOf(attrs)).To(Equal(&sqsv1alpha1.QueueMessages{Visible: 7, InFlight: 2, Delayed: 1}))
	g.Expect(messagesOf(map[string]string{"QueueArn": "arn:x"})).To(BeNil())
	g.Expect(messagesOf(map[string]string{"ApproximateNumberOfMessages": "3"})).To(Equal(&sqsv1alpha1.QueueMessages{Visible: 3}))
	g.Expect(reportedAttributes(attrs)).To(Equal(map[string]string{"QueueArn": "arn:x", "DelaySeconds": "0"}))
	g.Expect(reportedAttributes(map[string]string{"CreatedTimestamp": "1"})).To(BeNil())
}

func TestConnectionData(t *testing.T) {
	g := NewWithT(t)
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"}}
	q.Status.QueueURL, q.Status.QueueARN = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", "arn:aws:sqs:eu-west-1:123456789012:orders"
	g.Expect(connectionData(q)).To(Equal(map[string]string{
		"queueName": "orders", "queueURL": q.Status.QueueURL, "queueARN": q.Status.QueueARN, "region": "eu-west-1",
	}))
	q.Status.QueueARN = ""
	g.Expect(connectionData(q)).NotTo(HaveKey("region"))
}
