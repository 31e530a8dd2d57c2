package etcdbackup

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tend-dev/tend/internal/agentapi"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func resultJSON(r agentapi.Result) string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var (
	backupOK = agentapi.Result{Op: "backup",
		Artifact: &agentapi.Artifact{URI: "s3://b/k", SizeBytes: 10, SHA256: "abc", Compression: "None"},
		Snapshot: &agentapi.Snapshot{Member: "kv-0", Revision: 41, EtcdVersion: "3.6.16", DBSizeBytes: 20}}
	verifyOK  = agentapi.Result{Op: "verify", Verification: &agentapi.Verification{Revision: 42, Keys: 7, Hash: 99, LiveHash: 99, LiveKeys: 7, Matches: true, DurationSeconds: 3}}
	verifyBad = agentapi.Result{Op: "verify", Error: "hash mismatch", Terminal: true,
		Verification: &agentapi.Verification{Revision: 42, Keys: 7, Hash: 98, LiveHash: 99, LiveKeys: 7}}
)

func done(name string, code int32, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Message: message, FinishedAt: metav1.NewTime(t0),
	}}}
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(name, reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

func pod(name string, age time.Duration, phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Status:     corev1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: main},
	}
}

func TestReadStep(t *testing.T) {
	for _, tc := range []struct {
		name         string
		status       corev1.ContainerStatus
		wantState    stepState
		wantProblem  string
		wantTerminal bool
		wantResult   bool
	}{
		{name: "agent succeeded", status: done("backup", 0, resultJSON(backupOK)), wantState: stepSucceeded, wantResult: true},
		{name: "agent failed, retry may help", status: done("backup", 1, resultJSON(agentapi.Result{Op: "backup", Error: "no member answered"})),
			wantState: stepFailed, wantProblem: "no member answered", wantResult: true},
		{name: "agent refused", status: done("backup", 2, resultJSON(agentapi.Result{Op: "backup", Error: "object of another owner", Terminal: true})),
			wantState: stepFailed, wantProblem: "object of another owner", wantTerminal: true, wantResult: true},
		{name: "killed with no message", status: corev1.ContainerStatus{Name: "backup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "OOMKilled"}}},
			wantState: stepFailed, wantProblem: "exit code 137 (OOMKilled) before it wrote a result"},
		{name: "exit 0 without a result proves nothing", status: done("verify", 0, ""),
			wantState: stepFailed, wantProblem: "exited 0 but wrote no result", wantTerminal: true},
		{name: "another step's result is not this one's", status: done("fetch", 0, resultJSON(backupOK)),
			wantState: stepFailed, wantProblem: `the message is of step "backup", not "fetch"`, wantTerminal: true},
		{name: "etcdutl failed, its log as the message", status: done("restore", 1, "line 1\nline 2\nError: snapshot file has wrong hash\n"),
			wantState: stepFailed, wantProblem: "exit code 1: line 1 | line 2 | Error: snapshot file has wrong hash"},
		{name: "etcdutl succeeded", status: done("restore", 0, ""), wantState: stepSucceeded},
		{name: "running", status: running("verify"), wantState: stepRunning},
		{name: "image cannot be pulled", status: waiting("backup", "ImagePullBackOff", `Back-off pulling image "tend"`),
			wantState: stepPending, wantProblem: `ImagePullBackOff: Back-off pulling image "tend"`},
		{name: "starting", status: waiting("backup", "PodInitializing", ""), wantState: stepPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := readStep(tc.status)
			g.Expect(s.state).To(Equal(tc.wantState))
			if tc.wantProblem == "" {
				g.Expect(s.problem).To(BeEmpty())
			} else {
				g.Expect(s.problem).To(ContainSubstring(tc.wantProblem))
			}
			g.Expect(s.terminal).To(Equal(tc.wantTerminal))
			g.Expect(s.result != nil).To(Equal(tc.wantResult))
		})
	}
}

func TestObserve(t *testing.T) {
	fetched, restored, etcdUp := done("fetch", 0, resultJSON(agentapi.Result{Op: "fetch"})), done("restore", 0, ""), running("etcd")
	for _, tc := range []struct {
		name         string
		job          batchv1.JobStatus
		pods         []corev1.Pod
		verify       bool
		wantDone     bool
		wantVerify   *bool
		wantFailed   string
		wantRetrying string
		wantWaiting  string
	}{
		{name: "no pod yet", verify: true},
		{name: "backup running", verify: true,
			pods: []corev1.Pod{pod("p1", 0, corev1.PodPending, []corev1.ContainerStatus{running("backup"), waiting("fetch", "PodInitializing", "")})}},
		{name: "backup done, verifying", verify: true, wantDone: true,
			pods: []corev1.Pod{pod("p1", 0, corev1.PodRunning, []corev1.ContainerStatus{done("backup", 0, resultJSON(backupOK)), fetched, restored, etcdUp}, running("verify"))}},
		{name: "verified", verify: true, wantDone: true, wantVerify: ptr.To(true),
			pods: []corev1.Pod{pod("p1", 0, corev1.PodSucceeded, []corev1.ContainerStatus{done("backup", 0, resultJSON(backupOK)), fetched, restored, done("etcd", 0, "")},
				done("verify", 0, resultJSON(verifyOK)))}},
		{name: "hash mismatch", verify: true, wantDone: true, wantVerify: ptr.To(false), wantFailed: "step verify of pod p1 failed: hash mismatch",
			pods: []corev1.Pod{pod("p1", 0, corev1.PodFailed, []corev1.ContainerStatus{done("backup", 0, resultJSON(backupOK)), fetched, restored, done("etcd", 0, "")},
				done("verify", 2, resultJSON(verifyBad)))}},
		{name: "without verification, done once the backup is", wantDone: true,
			pods: []corev1.Pod{pod("p1", 0, corev1.PodSucceeded, nil, done("backup", 0, resultJSON(backupOK)))}},
		{name: "terminal failure fails at once", verify: true, wantFailed: "step backup of pod p1 failed: object of another owner",
			pods: []corev1.Pod{pod("p1", 0, corev1.PodFailed, []corev1.ContainerStatus{done("backup", 2, resultJSON(agentapi.Result{Op: "backup", Error: "object of another owner", Terminal: true}))})}},
		{name: "a killed pod is retried", verify: true, wantRetrying: "step backup of pod p1 failed: exit code 137 (OOMKilled) before it wrote a result",
			pods: []corev1.Pod{
				pod("p1", time.Minute, corev1.PodFailed, []corev1.ContainerStatus{{Name: "backup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}),
				pod("p2", 0, corev1.PodPending, []corev1.ContainerStatus{waiting("backup", "ContainerCreating", "")}),
			}},
		{name: "the Job gave up", verify: true,
			job:        batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}},
			wantFailed: "the Job gave up (BackoffLimitExceeded: Job has reached the specified backoff limit); the last failure: step backup of pod p1 failed: exit code 137",
			pods:       []corev1.Pod{pod("p1", 0, corev1.PodFailed, []corev1.ContainerStatus{{Name: "backup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}})}},
		{name: "a retry's newer backup is the one verified", verify: true, wantDone: true, wantVerify: ptr.To(true),
			pods: []corev1.Pod{
				pod("p1", time.Minute, corev1.PodFailed, []corev1.ContainerStatus{done("backup", 0, resultJSON(backupOK)), done("fetch", 1, resultJSON(agentapi.Result{Op: "fetch", Error: "timeout"}))}),
				pod("p2", 0, corev1.PodSucceeded, []corev1.ContainerStatus{done("backup", 0, resultJSON(backupOK)), fetched, restored, done("etcd", 0, "")}, done("verify", 0, resultJSON(verifyOK))),
			}},
		{name: "an image that cannot be pulled is said", verify: true, wantWaiting: "step backup of pod p1: ErrImagePull: not found",
			pods: []corev1.Pod{pod("p1", 0, corev1.PodPending, []corev1.ContainerStatus{waiting("backup", "ErrImagePull", "not found")})}},
		{name: "a Job that completed without results", verify: true, wantFailed: "no pod reported",
			job: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "b-backup"}, Status: tc.job}
			o := observe(readJob(job, tc.pods), stepBackup, tc.verify)
			g.Expect(o.done).To(Equal(tc.wantDone))
			if tc.wantDone {
				g.Expect(o.result.Artifact.SHA256).To(Equal("abc"))
				g.Expect(o.finishedAt).To(Equal(t0))
			}
			if tc.wantVerify == nil {
				g.Expect(o.verify).To(BeNil())
			} else {
				g.Expect(o.verify).NotTo(BeNil())
				g.Expect(o.verify.Verification.Matches).To(Equal(*tc.wantVerify))
			}
			g.Expect(o.failed).To(Equal(tc.wantFailed != ""))
			g.Expect(o.failure).To(ContainSubstring(tc.wantFailed))
			g.Expect(o.retrying).To(ContainSubstring(tc.wantRetrying))
			if tc.wantRetrying == "" {
				g.Expect(o.retrying).To(BeEmpty())
			}
			g.Expect(o.waiting).To(Equal(tc.wantWaiting))
		})
	}
}

func TestOwnedPods(t *testing.T) {
	g := NewWithT(t)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "b-backup", UID: "new"}}
	yes, no := true, true
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "ours", OwnerReferences: []metav1.OwnerReference{{UID: "new", Controller: &yes}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "an earlier Job's", OwnerReferences: []metav1.OwnerReference{{UID: "old", Controller: &no}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}},
	}
	got := ownedPods(pods, job)
	g.Expect(got).To(HaveLen(1))
	g.Expect(got[0].Name).To(Equal("ours"))
}
