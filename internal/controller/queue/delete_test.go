package queue

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/testing/faultproxy"
)

func TestRetainKeepsTheQueue(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	q := newQueue(ns, "kept", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.DeletionPolicy = sqsv1alpha1.DeletionPolicyRetain
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	waitReady(g, q)
	g.Expect(env.Client.Delete(context.Background(), q)).To(Succeed())
	waitGone(g, q)
	g.Expect(queueExists(g, name)).To(BeTrue())
}

func TestReleaseFinalizerWhenSQSIsGone(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	proxy := faultproxy.Start(t, server.URL)
	createConnectionSecret(g, ns, "via-proxy", proxy.URL())
	q := newQueue(ns, "stuck", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns)
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-proxy"}}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	waitReady(g, q)

	proxy.SetMode(faultproxy.ServerError)
	g.Expect(env.Client.Delete(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/UpstreamError"))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(ContainSubstring(sqsv1alpha1.AnnotationReleaseFinalizer + "=true"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	got := get(g, q)
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{sqsv1alpha1.AnnotationReleaseFinalizer: "true"}
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
	waitGone(g, q)
	g.Expect(queueExists(g, q.Spec.QueueName)).To(BeTrue(), "a released queue is left in SQS")
}
