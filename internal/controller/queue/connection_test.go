package queue

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
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

// TestConnectionEndpointMustBeAllowed: a connection Secret's endpoint that
// --sqs-allowed-endpoints does not allow (the suite allows 127.0.0.1 alone)
// is refused with a condition that says which flag allows it, and nothing
// is sent to it; one that the list allows is used.
func TestConnectionEndpointMustBeAllowed(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	var received atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(trap.Close)
	u, err := url.Parse(trap.URL)
	g.Expect(err).NotTo(HaveOccurred())
	refused := "http://localhost:" + u.Port() // the trap, by a name the list does not hold
	createConnectionSecret(g, ns, "elsewhere", refused)
	name := uniqueName(ns)
	q := newQueue(ns, "elsewhere", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "elsewhere"}}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/" + sqsv1alpha1.ReasonEndpointNotAllowed))
		g.Expect(condition(got, sqsv1alpha1.ConditionReady)).To(Equal("False/" + sqsv1alpha1.ReasonEndpointNotAllowed))
		g.Expect(condition(got, sqsv1alpha1.ConditionStalled)).To(Equal("True/" + sqsv1alpha1.ReasonEndpointNotAllowed))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation), "acted on: a person must")
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.FailedStatus))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(And(
			ContainSubstring(refused), ContainSubstring("--sqs-allowed-endpoints")))
		g.Expect(eventReasons(g, got)).To(ContainElement(sqsv1alpha1.ReasonEndpointNotAllowed))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(received.Load()).To(BeZero(), "a request reached the refused endpoint")
		g.Expect(condition(get(g, q), sqsv1alpha1.ConditionSynced)).To(Equal("False/" + sqsv1alpha1.ReasonEndpointNotAllowed))
	}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	g.Expect(queueExists(g, name)).To(BeFalse())

	// The Secret names an endpoint that the list allows (moto, on
	// 127.0.0.1): its change starts a pass, which goes through.
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "elsewhere"}, secret)).To(Succeed())
	secret.Data[keyEndpointSQS] = []byte(server.URL)
	g.Expect(env.Client.Update(context.Background(), secret)).To(Succeed())
	waitReady(g, q)
	g.Expect(queueExists(g, name)).To(BeTrue())
	g.Expect(received.Load()).To(BeZero())
}

// TestOnlySecretEndpointsAreChecked: the manager's own endpoint is used
// whatever the list says, and the list decides for a Secret's, even when it
// names that same endpoint. Client sends nothing.
func TestOnlySecretEndpointsAreChecked(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 1, Burst: 1})
	g.Expect(err).NotTo(HaveOccurred())
	const own = "http://127.0.0.1:4566"
	c := &Connector{Reader: env.Client, Default: tendaws.Connection{EndpointURL: own, Region: "us-east-1", Limiters: limiters}}
	_, err = c.Client(ctx(), newQueue(ns, "plain", nil))
	g.Expect(err).NotTo(HaveOccurred())

	createConnectionSecret(g, ns, "same", own)
	withSecret := newQueue(ns, "with-secret", func(s *sqsv1alpha1.QueueSpec) {
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "same"}}
	})
	_, err = c.Client(ctx(), withSecret)
	var notAllowed *endpointNotAllowedError
	g.Expect(errors.As(err, &notAllowed)).To(BeTrue(), "%v", err)

	c.AllowedEndpoints, err = ParseEndpointAllowList([]string{own})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Client(ctx(), withSecret)
	g.Expect(err).NotTo(HaveOccurred())
}
