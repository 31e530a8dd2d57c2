package etcdbackup

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/testenv"
)

// The suite runs the EtcdBackup and EtcdBackupSchedule controllers through
// the manager's assembly against a real apiserver. envtest runs no
// kubelet, no Job controller and no garbage collector: Jobs never run, so
// the tests play the kubelet's part at the boundary the controllers read,
// by creating a Job's pod (with the job-name label and the Job as its
// controller) and writing its status with the agents' termination
// messages. No EtcdCluster controller runs either: the tests create
// EtcdClusters, their status and their connection ConfigMap themselves.
// The controllers' clock is a fake one that the schedule tests set.
//
// A backup whose Job runs asks for no requeue (TestARunningJobIsNotPolled):
// where a test writes a pod's status and the backup follows, the pod
// watch started that pass.

var (
	env       = testenv.New()
	fakeClock = clocktesting.NewFakeClock(time.Now())
)

func TestMain(m *testing.M) {
	os.Exit(env.RunWith(m, func(ctx context.Context) error {
		opts := &Options{Workers: 2, AgentImage: testImage, Clock: fakeClock}
		return env.StartManager(ctx, "0", Controllers(opts))
	}))
}

// kstatusOf is what kstatus (the wait of Helm and Flux) says of obj now.
func kstatusOf(g Gomega, obj client.Object) kstatus.Status {
	st, _, err := env.KStatus(context.Background(), obj)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}
