package queue

import (
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

func TestRedriveRequest(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		status     *sqsv1alpha1.RedriveStatus
		want       string
	}{
		{name: "no annotation", want: ""},
		{name: "new request", annotation: "t1", want: "t1"},
		{name: "answered", annotation: "t1", status: &sqsv1alpha1.RedriveStatus{Request: "t1", State: "COMPLETED"}, want: ""},
		{name: "answered, then asked again", annotation: "t2", status: &sqsv1alpha1.RedriveStatus{Request: "t1", State: "COMPLETED"}, want: "t2"},
		{name: "refused is answered too", annotation: "t1", status: &sqsv1alpha1.RedriveStatus{Request: "t1", State: moveRefused}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
			if tt.annotation != "" {
				q.Annotations[sqsv1alpha1.AnnotationRedrive] = tt.annotation
			}
			q.Status.Redrive = tt.status
			NewWithT(t).Expect(redriveRequest(q)).To(Equal(tt.want))
		})
	}
}

func TestMoveInProgress(t *testing.T) {
	g := NewWithT(t)
	g.Expect(moveInProgress(nil)).To(BeFalse())
	for state, want := range map[string]bool{"RUNNING": true, "CANCELLING": true, "COMPLETED": false, "CANCELLED": false, "FAILED": false, moveRefused: false, moveUnknown: false} {
		g.Expect(moveInProgress(&sqsv1alpha1.RedriveStatus{State: state})).To(Equal(want), state)
	}
}

func TestApplyMoveTask(t *testing.T) {
	g := NewWithT(t)
	started := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	st := &sqsv1alpha1.RedriveStatus{Request: "r", TaskHandle: "h", State: "RUNNING"}
	applyMoveTask(st, sqstypes.ListMessageMoveTasksResultEntry{
		Status: awssdk.String("FAILED"), ApproximateNumberOfMessagesMoved: 4, ApproximateNumberOfMessagesToMove: awssdk.Int64(10),
		FailureReason: awssdk.String("AccessDenied"), StartedTimestamp: started.UnixMilli(),
	})
	g.Expect(st.Request).To(Equal("r"))
	g.Expect(st.TaskHandle).To(Equal("h"))
	g.Expect(st.State).To(Equal("FAILED"))
	g.Expect(st.MessagesMoved).To(Equal(int64(4)))
	g.Expect(st.MessagesToMove).To(Equal(int64(10)))
	g.Expect(st.Message).To(Equal("AccessDenied"))
	g.Expect(st.StartTime.Time.Equal(started)).To(BeTrue())
}

func TestArnChangedPredicate(t *testing.T) {
	g := NewWithT(t)
	q := func(arn string, messages int64) *sqsv1alpha1.Queue {
		out := &sqsv1alpha1.Queue{}
		out.Status.QueueARN, out.Status.Messages = arn, &sqsv1alpha1.QueueMessages{Visible: messages}
		return out
	}
	g.Expect(arnChanged.Update(event.UpdateEvent{ObjectOld: q("", 0), ObjectNew: q("arn:a", 0)})).To(BeTrue(), "became Ready")
	g.Expect(arnChanged.Update(event.UpdateEvent{ObjectOld: q("arn:a", 0), ObjectNew: q("arn:a", 5)})).To(BeFalse(), "only its depth changed")
	g.Expect(arnChanged.Create(event.CreateEvent{Object: q("", 0)})).To(BeTrue())
	g.Expect(arnChanged.Delete(event.DeleteEvent{Object: q("arn:a", 0)})).To(BeTrue())
}
