package queue

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

func TestDecide(t *testing.T) {
	mine := map[string]string{ownerTag: "ns/q"}
	theirs := map[string]string{ownerTag: "other/q"}
	tests := []struct {
		name     string
		adoption sqsv1alpha1.Adoption
		known    bool
		obs      observed
		want     plan
	}{
		{name: "absent: create", adoption: sqsv1alpha1.AdoptionNone, want: planCreate},
		{name: "absent, adopt or create: create", adoption: sqsv1alpha1.AdoptionAdoptOrCreate, want: planCreate},
		{name: "absent, adopt only: wait", adoption: sqsv1alpha1.AdoptionAdopt, want: planWait},
		{name: "deleted out of band: create again", adoption: sqsv1alpha1.AdoptionNone, known: true, want: planCreate},
		{name: "adopted then deleted: wait", adoption: sqsv1alpha1.AdoptionAdopt, known: true, want: planWait},
		{name: "ours by status", adoption: sqsv1alpha1.AdoptionNone, known: true, obs: observed{exists: true}, want: planManage},
		{name: "ours by tag, status lost", adoption: sqsv1alpha1.AdoptionNone, obs: observed{exists: true, tags: mine}, want: planManage},
		{name: "foreign, no adoption: refuse", adoption: sqsv1alpha1.AdoptionNone, obs: observed{exists: true, tags: theirs}, want: planRefuse},
		{name: "foreign, adopt", adoption: sqsv1alpha1.AdoptionAdopt, obs: observed{exists: true}, want: planAdopt},
		{name: "foreign, adopt or create", adoption: sqsv1alpha1.AdoptionAdoptOrCreate, obs: observed{exists: true}, want: planAdopt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}}
			q.Spec.Adoption = tt.adoption
			if tt.known {
				q.Status.QueueURL = "http://sqs/123456789012/q"
			}
			NewWithT(t).Expect(decide(q, tt.obs)).To(Equal(tt.want))
		})
	}
}

func TestAdoption(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	out, err := sqsAPI.CreateQueue(ctx(), &sqs.CreateQueueInput{QueueName: awssdk.String(name), Tags: map[string]string{"made-by": "hand"}})
	g.Expect(err).NotTo(HaveOccurred())

	// adoption None refuses a queue that Tend did not make, and says how to proceed.
	q := newQueue(ns, "foreign", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/QueueExists"))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(ContainSubstring("set spec.adoption to Adopt or AdoptOrCreate"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(tags(g, *out.QueueUrl)).NotTo(HaveKey(ownerTag), "a refused queue is not touched")

	// Adopt takes it over, and tags it as Tend's.
	got := get(g, q)
	got.Spec.Adoption = sqsv1alpha1.AdoptionAdopt
	g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
	got = waitReady(g, q)
	g.Expect(got.Status.QueueURL).To(Equal(*out.QueueUrl))
	g.Expect(tags(g, *out.QueueUrl)).To(HaveKeyWithValue(ownerTag, ns+"/foreign"))
	g.Expect(tags(g, *out.QueueUrl)).To(HaveKeyWithValue("made-by", "hand"), "tags are Tend's only when the spec declares them")

	// Adopt never creates: a missing queue is reported, not made.
	missing := newQueue(ns, "missing", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns) + "-m"
		s.Adoption = sqsv1alpha1.AdoptionAdopt
	})
	g.Expect(env.Client.Create(context.Background(), missing)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, missing), sqsv1alpha1.ConditionReady)).To(Equal("False/QueueMissing"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(queueExists(g, missing.Spec.QueueName)).To(BeFalse())
}
