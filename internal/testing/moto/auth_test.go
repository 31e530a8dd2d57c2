package moto

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
)

func TestSetAuth(t *testing.T) {
	g := NewWithT(t)
	s := Start(t)
	user, err := s.CreateUser("someone", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(user.Name).To(Equal("someone"))
	g.Expect(user.AccessKeyID).NotTo(BeEmpty())
	g.Expect(user.SecretAccessKey).NotTo(BeEmpty())

	c := defaultClient(t)
	g.Expect(s.SetAuth(true)).To(Succeed())
	_, err = c.ListQueues(callCtx(t), &sqs.ListQueuesInput{})
	g.Expect(err).To(MatchError(ContainSubstring("StatusCode: 403")), "the fake key is unknown to IAM")

	g.Expect(s.SetAuth(false)).To(Succeed())
	g.Expect(listQueues(t, c)).To(BeEmpty())
}
