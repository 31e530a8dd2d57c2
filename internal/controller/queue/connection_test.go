package queue

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

func TestConnectionSecret(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "via-secret", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns)
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "aws"}}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/ConnectionError"))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(ContainSubstring(`reading the connection Secret aws`))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The Secret's arrival starts a pass by itself.
	createConnectionSecret(g, ns, "aws", server.URL)
	waitReady(g, q)
}
