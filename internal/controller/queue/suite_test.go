package queue

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// The suite runs the controller in this process, through the manager that
// `tend manager` assembles (testenv.StartManager), against a real apiserver
// (envtest) and a real SQS API (moto_server on 127.0.0.1).

var (
	env    = testenv.New()
	server = moto.New()
	// sqsAPI is the tests' own view of SQS, outside the controller's limiter.
	sqsAPI *sqs.Client
)

// testAllowedEndpoints is the manager's --sqs-allowed-endpoints here.
const testAllowedEndpoints = "http://127.0.0.1:*"

// testPoll stands in for every poll interval, so that drift repair shows
// within seconds; the jitter itself is tested on its own.
const testPoll = time.Second

func TestMain(m *testing.M) {
	if err := env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	code := server.Run(m) // points the process's AWS settings at moto
	stopAll()
	if err := env.Stop(); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

var (
	managerOnce sync.Once
	managerErr  error
	// callCtx carries the deadline that every SQS call must have.
	callCtx, stopAll = context.WithTimeout(context.Background(), time.Hour)
)

// startManager starts the manager once, from the first test: only then has
// server.Run put moto's settings in the environment.
func startManager(t *testing.T) {
	t.Helper()
	managerOnce.Do(func() { managerErr = runManager(callCtx) })
	if managerErr != nil {
		t.Fatalf("starting the manager: %v", managerErr)
	}
}

func runManager(ctx context.Context) error {
	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 200, Burst: 200})
	if err != nil {
		return err
	}
	cfg, err := tendaws.LoadConfig(ctx, tendaws.Connection{Limiters: limiters})
	if err != nil {
		return err
	}
	sqsAPI = sqs.NewFromConfig(cfg)

	ctrlLimiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 200, Burst: 200})
	if err != nil {
		return err
	}
	// Connection Secrets may send a Queue's calls to moto and to the tests'
	// fault proxies, all on 127.0.0.1; nowhere else.
	allowed, err := ParseEndpointAllowList([]string{testAllowedEndpoints})
	if err != nil {
		return err
	}
	controller := manager.Controller{Name: Name, Setup: func(mgr ctrl.Manager) error {
		r := &Reconciler{
			Client:   mgr.GetClient(),
			Recorder: mgr.GetEventRecorder("tend-queue"),
			// The Secret is read live, as Controller wires it: the Secret
			// watch is metadata-only, and a cached read could lag it.
			Connector: &Connector{Reader: mgr.GetAPIReader(), AllowedEndpoints: allowed,
				Default: tendaws.Connection{Limiters: ctrlLimiters}},
			Jitter: func(time.Duration) time.Duration { return testPoll },
			// Short, so that a hanging upstream fails a pass within seconds.
			Timeout: 3 * time.Second,
		}
		return r.SetupWithManager(mgr, 4)
	}}
	return env.StartManager(ctx, "0", []manager.Controller{controller})
}

// Helpers shared by the tests.

func newQueue(ns, name string, mutate func(*sqsv1alpha1.QueueSpec)) *sqsv1alpha1.Queue {
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	return q
}

// uniqueName makes an SQS name that no other test (or earlier run against
// the same moto) uses, since SQS names are global to the account.
func uniqueName(ns string) string {
	return fmt.Sprintf("%s-%d", ns, time.Now().UnixNano()%1_000_000)
}

func get(g Gomega, q *sqsv1alpha1.Queue) *sqsv1alpha1.Queue {
	out := &sqsv1alpha1.Queue{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(q), out)).To(Succeed())
	return out
}

// condition returns "Status/Reason" of the Queue's condition typ.
func condition(q *sqsv1alpha1.Queue, typ string) string {
	c := meta.FindStatusCondition(q.Status.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// waitReady waits for the Queue to be Ready and returns it.
func waitReady(g Gomega, q *sqsv1alpha1.Queue) *sqsv1alpha1.Queue {
	var got *sqsv1alpha1.Queue
	g.Eventually(func(g Gomega) {
		got = get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionReady)).To(Equal("True/Available"))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return got
}

func attributes(g Gomega, url string) map[string]string {
	out, err := sqsAPI.GetQueueAttributes(ctx(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	g.Expect(err).NotTo(HaveOccurred())
	return out.Attributes
}

func tags(g Gomega, url string) map[string]string {
	out, err := sqsAPI.ListQueueTags(ctx(), &sqs.ListQueueTagsInput{QueueUrl: &url})
	g.Expect(err).NotTo(HaveOccurred())
	return out.Tags
}

// queueExists says whether SQS has a queue of that name.
func queueExists(g Gomega, name string) bool {
	_, err := sqsAPI.GetQueueUrl(ctx(), &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)})
	if tendaws.Classify(err) == tendaws.NotFound {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// ctx is a context with the deadline that every SQS call must carry.
func ctx() context.Context { return callCtx }

func cond(q *sqsv1alpha1.Queue, typ string) metav1.Condition {
	for _, c := range q.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// waitGone waits until the Queue has left the apiserver.
func waitGone(g Gomega, q *sqsv1alpha1.Queue) {
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(q), &sqsv1alpha1.Queue{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
}

// createConnectionSecret creates a connection Secret that sends a Queue's
// SQS calls to endpoint.
func createConnectionSecret(g Gomega, ns, name, endpoint string) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{
		keyAccessKeyID: "test", keySecretAccessKey: "test", keyEndpointSQS: endpoint,
	}}
	g.Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
}

// eventReasons lists the reasons of the Events about obj.
func eventReasons(g Gomega, obj client.Object) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Regarding.UID == obj.GetUID() {
			out = append(out, e.Reason)
		}
	}
	return out
}

// kstatusOf is what kstatus (the wait of Helm and Flux) says of q now.
func kstatusOf(g Gomega, q *sqsv1alpha1.Queue) kstatus.Status {
	st, _, err := env.KStatus(context.Background(), q)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}
