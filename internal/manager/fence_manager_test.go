package manager_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// TestFenceRefusesAnExLeadersWrites runs a manager with leader election on
// a real apiserver. Once it leads, its controllers' client writes; once the
// Lease passes to another process behind its back, as it does to a leader
// frozen past its Lease, the next write after the fence's interval is
// refused and the manager stops with an error, leaving the Lease to its new
// holder.
func TestFenceRefusesAnExLeadersWrites(t *testing.T) {
	g := NewWithT(t)
	env := testenv.New()
	g.Expect(env.Start()).To(Succeed())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ns := env.Namespace(t)

	// A controller's view of the manager: only its client.
	var controllers client.Client
	probe := manager.Controller{Name: "probe", Setup: func(mgr ctrl.Manager) error {
		controllers = mgr.GetClient()
		return nil
	}}
	opts := env.ManagerOptions()
	opts.LeaderElect = true
	opts.LeaderElectionNamespace = ns

	// Without leader election, there is nothing to fence with: the
	// controllers get the manager's own client.
	opts.LeaderElect = false
	mgr, err := manager.New(env.Config, opts, []manager.Controller{probe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controllers).To(BeIdenticalTo(mgr.GetClient()))

	opts.LeaderElect = true
	mgr, err = manager.New(env.Config, opts, []manager.Controller{probe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controllers).NotTo(BeIdenticalTo(mgr.GetClient()))
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("The manager stopped before it was elected: %v", err)
	}

	written := func(name string) bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return false
		}
		g.Expect(err).NotTo(HaveOccurred())
		return true
	}
	write := func(name string) error {
		return controllers.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	g.Expect(write("leading")).To(Succeed())
	g.Expect(written("leading")).To(BeTrue())

	// Another process takes the Lease; this one's leader elector finds out
	// only at its next renewal, and gives up only at its renew deadline.
	const other = "another-replica_00000000-0000-0000-0000-000000000000"
	key := client.ObjectKey{Namespace: ns, Name: opts.LeaderElectionID}
	g.Eventually(func() error {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, key, l); err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To(other)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		return env.Client.Update(ctx, l)
	}).Should(Succeed())

	// Writes within the interval of the last check pass; the first after
	// it is refused.
	var last string
	g.Eventually(func() error {
		last = fmt.Sprintf("write-%d", time.Now().UnixNano())
		return write(last)
	}).WithTimeout(time.Minute).Should(MatchError(manager.ErrNotLeader))
	g.Expect(written(last)).To(BeFalse())
	g.Expect(write("after")).To(MatchError(manager.ErrNotLeader))
	g.Expect(written("after")).To(BeFalse())

	// The fence stops the manager, well before the renew deadline would.
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(MatchError(manager.ErrNotLeader)))
	// On its way out, it did not release the Lease over its new holder.
	l := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, key, l)).To(Succeed())
	g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(other)))
}
