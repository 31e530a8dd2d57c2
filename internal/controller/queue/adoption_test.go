package queue

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
		{name: "unowned, no adoption: refuse", adoption: sqsv1alpha1.AdoptionNone, obs: observed{exists: true, tags: map[string]string{"team": "x"}}, want: planRefuse},
		{name: "unowned, adopt", adoption: sqsv1alpha1.AdoptionAdopt, obs: observed{exists: true}, want: planAdopt},
		{name: "unowned, adopt or create", adoption: sqsv1alpha1.AdoptionAdoptOrCreate, obs: observed{exists: true}, want: planAdopt},
		{name: "empty owner tag counts as none", adoption: sqsv1alpha1.AdoptionAdopt, obs: observed{exists: true, tags: map[string]string{ownerTag: ""}}, want: planAdopt},
		{name: "another Queue's, no adoption", adoption: sqsv1alpha1.AdoptionNone, obs: observed{exists: true, tags: theirs}, want: planOwnedByAnother},
		{name: "another Queue's, adopt", adoption: sqsv1alpha1.AdoptionAdopt, obs: observed{exists: true, tags: theirs}, want: planOwnedByAnother},
		{name: "another Queue's, adopt or create", adoption: sqsv1alpha1.AdoptionAdoptOrCreate, obs: observed{exists: true, tags: theirs}, want: planOwnedByAnother},
		{name: "another Queue's though status records it", adoption: sqsv1alpha1.AdoptionAdopt, known: true, obs: observed{exists: true, tags: theirs}, want: planOwnedByAnother},
		{name: "another name in this namespace", adoption: sqsv1alpha1.AdoptionAdopt, obs: observed{exists: true, tags: map[string]string{ownerTag: "ns/q2"}}, want: planOwnedByAnother},
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

func TestOtherOwner(t *testing.T) {
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "u1"}}
	tests := []struct {
		name string
		tags map[string]string
		want string
	}{
		{name: "no tags"},
		{name: "no owner tag", tags: map[string]string{"team": "a"}},
		{name: "empty owner tag", tags: map[string]string{ownerTag: ""}},
		{name: "this Queue (namespace/name, whatever its UID)", tags: map[string]string{ownerTag: "ns/q"}},
		{name: "another namespace", tags: map[string]string{ownerTag: "other/q"}, want: "other/q"},
		{name: "another name", tags: map[string]string{ownerTag: "ns/q2"}, want: "ns/q2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(otherOwner(q, tt.tags)).To(Equal(tt.want))
		})
	}
}

// TestAnotherQueuesQueueIsNeverTakenOver: a Queue in another namespace that
// names an SQS queue which a Queue created, even with adoption Adopt,
// neither adopts nor changes it, says whose it is, and lets go of it
// untouched when it is deleted.
func TestAnotherQueuesQueueIsNeverTakenOver(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	name := uniqueName(nsA)
	owner := newQueue(nsA, "orders", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.VisibilityTimeout = ptr.To[int32](30)
	})
	g.Expect(env.Client.Create(context.Background(), owner)).To(Succeed())
	url := waitReady(g, owner).Status.QueueURL

	other := newQueue(nsB, "orders", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.Adoption = sqsv1alpha1.AdoptionAdopt
		s.VisibilityTimeout = ptr.To[int32](77)
		s.Tags = map[string]string{"team": "b"}
	})
	g.Expect(env.Client.Create(context.Background(), other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, other)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/" + sqsv1alpha1.ReasonOwnedByAnotherQueue))
		g.Expect(condition(got, sqsv1alpha1.ConditionReady)).To(Equal("False/" + sqsv1alpha1.ReasonOwnedByAnotherQueue))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(And(
			ContainSubstring(nsA+"/orders"), ContainSubstring("spec.queueName")))
		g.Expect(got.Status.QueueURL).To(BeEmpty())
		g.Expect(eventReasons(g, got)).To(ContainElement(sqsv1alpha1.ReasonOwnedByAnotherQueue))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Over several polls, the queue stays the first Queue's, as it declared it.
	g.Consistently(func(g Gomega) {
		g.Expect(tags(g, url)).To(Equal(map[string]string{ownerTag: nsA + "/orders"}))
		g.Expect(attributes(g, url)).To(HaveKeyWithValue("VisibilityTimeout", "30"))
		g.Expect(condition(get(g, owner), sqsv1alpha1.ConditionReady)).To(Equal("True/Available"))
		g.Expect(condition(get(g, other), sqsv1alpha1.ConditionSynced)).To(Equal("False/" + sqsv1alpha1.ReasonOwnedByAnotherQueue))
	}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	// Deleting the other Queue (deletionPolicy Delete) leaves the queue alone.
	g.Expect(env.Client.Delete(context.Background(), other)).To(Succeed())
	waitGone(g, other)
	g.Expect(queueExists(g, name)).To(BeTrue())
	g.Expect(tags(g, url)).To(HaveKeyWithValue(ownerTag, nsA+"/orders"))
	g.Expect(waitReady(g, owner).Status.QueueURL).To(Equal(url))
}
