package manager

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/scheme"
)

// ErrNotLeader is what a fenced write returns, wrapped, once this process is
// found not to hold the leader-election Lease: another process holds it, or
// it has expired. It is for good: the manager stops (see Run). It is
// fence.ErrNotLeader, which the upstream clients' gates return too.
var ErrNotLeader = fence.ErrNotLeader

// fenceInterval is how long a check that this process holds the Lease lets
// writes through without another. The fence reads the Lease at most once per
// interval, whatever the number of writes: one GET a second at most. It is
// small against the Lease's duration (15s by default) that a thawed
// ex-leader overran: a write that the fence lets through was checked at most
// this long before, and never past the Lease's expiry.
const fenceInterval = time.Second

// leaseFence refuses writes unless this process holds the leader-election
// Lease. controller-runtime's leader election is not a fence: a leader
// frozen past its Lease (SIGSTOP, a GC or VM pause) runs its workers on a
// stale cache when it thaws, before its renew loop finds the Lease taken
// (D1 in docs/reliability.md). The fence reads the Lease live before the
// writes of each interval, and lets them through only if this process holds
// it and it has not expired by the local clock.
//
// It is the controllers' fence.Gate (GateOf), for their writes outside
// Kubernetes (SQS, etcd), as well as their client's: one state, one
// interval, one read of the Lease for all of them.
type leaseFence struct {
	live     client.Reader // uncached: a cached Lease would be as stale as the rest
	lease    client.ObjectKey
	identity string
	interval time.Duration
	timeout  time.Duration // of one GET of the Lease
	clock    clock.PassiveClock
	// onLost is called, once, when the Lease is found held by another or
	// expired.
	onLost func(error)

	// sem is held while the state below is read or written, and across a
	// GET of the Lease, so that concurrent writers wait for one check
	// rather than each making its own.
	sem        chan struct{}
	validUntil time.Time // writes pass until then without a check
	lost       error     // wraps ErrNotLeader once the Lease is lost
}

func newFence(live client.Reader, lease client.ObjectKey, identity string, timeout time.Duration, clk clock.PassiveClock, onLost func(error)) *leaseFence {
	return &leaseFence{
		live:     live,
		lease:    lease,
		identity: identity,
		interval: fenceInterval,
		timeout:  timeout,
		clock:    clk,
		onLost:   onLost,
		sem:      make(chan struct{}, 1),
	}
}

// Allow returns nil if this process may write: it held the Lease, unexpired,
// at a check less than an interval ago. It returns an error wrapping
// ErrNotLeader if the Lease is lost, and another error if the Lease could
// not be read: leadership unproven, the write is refused, and the next
// write checks again.
func (f *leaseFence) Allow(ctx context.Context) error {
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the check of the Lease %s: %w", f.lease, ctx.Err())
	}
	defer func() { <-f.sem }()
	if f.lost != nil {
		return f.lost
	}
	start := f.clock.Now()
	if start.Before(f.validUntil) {
		return nil
	}
	getCtx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	lease := &coordinationv1.Lease{}
	if err := f.live.Get(getCtx, f.lease, lease); err != nil {
		return fmt.Errorf("checking that this process holds the Lease %s before writing: %w", f.lease, err)
	}
	expiry, err := held(lease, f.identity, f.clock.Now())
	if err != nil {
		f.lost = err
		f.onLost(f.lost)
		return f.lost
	}
	// The check tells of the Lease as it was somewhere between start and
	// now: it is good for an interval from start, and not past the
	// Lease's expiry.
	f.validUntil = start.Add(f.interval)
	if expiry.Before(f.validUntil) {
		f.validUntil = expiry
	}
	return nil
}

// held returns when lease expires if identity holds it and it has not
// expired at now, and otherwise an error wrapping ErrNotLeader. The Lease's
// holder renews it by its own clock, so for its holder the expiry is not
// subject to clock skew; a follower counts the duration from when it saw
// the last renewal, which is no sooner.
func held(lease *coordinationv1.Lease, identity string, now time.Time) (time.Time, error) {
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != identity {
		return time.Time{}, fmt.Errorf("%w: the Lease %s/%s is held by %q, not %q",
			ErrNotLeader, lease.Namespace, lease.Name, holder, identity)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, fmt.Errorf("%w: the Lease %s/%s has no renew time or duration",
			ErrNotLeader, lease.Namespace, lease.Name)
	}
	expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	if !now.Before(expiry) {
		return time.Time{}, fmt.Errorf("%w: the Lease %s/%s expired at %s, %s ago",
			ErrNotLeader, lease.Namespace, lease.Name, expiry.UTC().Format(time.RFC3339Nano), now.Sub(expiry))
	}
	return expiry, nil
}

// fencedClient is a client whose writes, of objects and of their status and
// other subresources, each pass the fence first. Its reads do not.
type fencedClient struct {
	client.Client
	fence *leaseFence
}

func (c fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c fencedClient) Status() client.SubResourceWriter {
	return fencedSubResourceWriter{SubResourceWriter: c.Client.Status(), fence: c.fence}
}

func (c fencedClient) SubResource(subResource string) client.SubResourceClient {
	sr := c.Client.SubResource(subResource)
	return fencedSubResourceClient{SubResourceReader: sr, fencedSubResourceWriter: fencedSubResourceWriter{SubResourceWriter: sr, fence: c.fence}}
}

type fencedSubResourceClient struct {
	client.SubResourceReader
	fencedSubResourceWriter
}

type fencedSubResourceWriter struct {
	client.SubResourceWriter
	fence *leaseFence
}

func (c fencedSubResourceWriter) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.SubResourceWriter.Create(ctx, obj, subResource, opts...)
}

func (c fencedSubResourceWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

func (c fencedSubResourceWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (c fencedSubResourceWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := c.fence.Allow(ctx); err != nil {
		return err
	}
	return c.SubResourceWriter.Apply(ctx, obj, opts...)
}

// fencedManager is the manager as the controllers see it, when leader
// election is on: its client's writes pass the fence, and GateOf returns
// the fence, for the controllers' writes elsewhere. The webhooks, and
// their certificate rotator, which run on every replica, see the manager
// itself.
type fencedManager struct {
	ctrl.Manager
	client client.Client
	fence  *leaseFence
}

func (m fencedManager) GetClient() client.Client { return m.client }

// Gate returns the fence that the manager's client's writes pass.
func (m fencedManager) Gate() fence.Gate { return m.fence }

// GateOf returns the check that a controller's writes outside Kubernetes
// (SQS, etcd) must each pass before they are sent: with leader election
// on, the very fence of the client that mgr gives the controllers (the
// same check of the Lease, at most once a second, and the same stop once
// it is lost); with leader election off, or for a manager that New did not
// give, fence.Open. A controller calls it in its Setup, with the manager
// that Setup was given, and hands the Gate to the clients it builds.
func GateOf(mgr ctrl.Manager) fence.Gate {
	if m, ok := mgr.(interface{ Gate() fence.Gate }); ok {
		return m.Gate()
	}
	return fence.Open{}
}

// writeFence is what New builds, with leader election on, to fence the
// controllers' writes: the manager's lock, built here so that the fence
// knows its identity and Lease, and the way out once the Lease is lost.
type writeFence struct {
	lock      *fencedLock
	lease     client.ObjectKey
	reader    client.Reader // of the Lease, with a rate limiter of its own
	recorders *lateRecorders
	timeout   time.Duration // of a GET of the Lease
	lost      chan struct{} // closed when the fence finds the Lease lost
	err       error         // why; written before lost is closed
}

// newWriteFence builds the lock for the manager's options.
func newWriteFence(cfg *rest.Config, opts Options) (*writeFence, error) {
	w := &writeFence{
		recorders: &lateRecorders{},
		// As controller-runtime bounds the requests of its lock.
		timeout: max(opts.RenewDeadline/2, time.Second),
		lost:    make(chan struct{}),
	}
	var err error
	w.lock, w.lease, err = leaseLock(cfg, opts, w.recorders, w.lost)
	if err != nil {
		return nil, err
	}
	// Not the manager's reader: the controllers' shared bucket must not
	// hold up a read that every write waits for.
	if w.reader, err = client.New(cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, fmt.Errorf("creating the write fence's client: %w", err)
	}
	return w, nil
}

// install returns mgr, built with w.lock, as the controllers are to see
// it: its client's writes pass the fence. When the fence finds the Lease
// lost, mgr stops with an error, as it does when its leader elector finds
// the Lease lost, so that the process exits.
func (w *writeFence) install(mgr ctrl.Manager) (ctrl.Manager, error) {
	w.recorders.mgr = mgr
	f := newFence(w.reader, w.lease, w.lock.Identity(), w.timeout, clock.RealClock{}, w.stop)
	if err := mgr.Add(manager.RunnableFunc(w.wait)); err != nil {
		return nil, fmt.Errorf("adding the write fence: %w", err)
	}
	return fencedManager{Manager: mgr, client: fencedClient{Client: mgr.GetClient(), fence: f}, fence: f}, nil
}

// stop is the fence's onLost: it is called once.
func (w *writeFence) stop(err error) {
	w.err = err
	close(w.lost)
}

// wait runs in the manager, with the controllers, until the manager stops
// or the fence finds the Lease lost: its error stops the manager.
func (w *writeFence) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-w.lost:
		return fmt.Errorf("leader election lost, found by the write fence: %w", w.err)
	}
}

// leaseLock is the lock that the manager's leader election holds: the one
// controller-runtime would build (a Lease, its identity the hostname, "_",
// and a UUID), built here so that the fence knows the identity and the
// Lease. Once lost is closed, it refuses to write the Lease: a release on
// the way out, from a leader elector that has not yet seen the Lease
// taken, would otherwise overwrite its new holder's.
func leaseLock(cfg *rest.Config, opts Options, recorders recorder.Provider, lost <-chan struct{}) (*fencedLock, client.ObjectKey, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	lock, err := leaderelection.NewResourceLock(cfg, recorders, leaderelection.Options{
		LeaderElection:          true,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		RenewDeadline:           opts.RenewDeadline,
	})
	if err != nil {
		return nil, client.ObjectKey{}, fmt.Errorf("creating the leader-election lock: %w", err)
	}
	lease, ok := lock.(*resourcelock.LeaseLock)
	if !ok {
		return nil, client.ObjectKey{}, fmt.Errorf("the leader-election lock is a %T, not a Lease", lock)
	}
	key := client.ObjectKey{Namespace: lease.LeaseMeta.Namespace, Name: lease.LeaseMeta.Name}
	return &fencedLock{Interface: lock, lost: lost}, key, nil
}

// fencedLock is a leader-election lock that writes nothing once lost is
// closed.
type fencedLock struct {
	resourcelock.Interface
	lost <-chan struct{}
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	select {
	case <-l.lost:
		return fmt.Errorf("not creating the Lease %s: %w", l.Describe(), ErrNotLeader)
	default:
		return l.Interface.Create(ctx, ler)
	}
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	select {
	case <-l.lost:
		return fmt.Errorf("not updating the Lease %s: %w", l.Describe(), ErrNotLeader)
	default:
		return l.Interface.Update(ctx, ler)
	}
}

// lateRecorders gives the leader-election lock, which the manager takes
// when it is built, the manager's event recorder, which exists only once it
// is. The lock records its Events ("... became leader") only once the
// manager runs, and mgr is set before.
type lateRecorders struct {
	recorder.Provider // nil: the lock asks for GetEventRecorderFor only
	mgr               ctrl.Manager
}

func (p *lateRecorders) GetEventRecorderFor(name string) record.EventRecorder {
	return lateRecorder{p: p, name: name}
}

type lateRecorder struct {
	p    *lateRecorders
	name string
}

func (r lateRecorder) get() record.EventRecorder {
	if r.p.mgr == nil {
		return &record.FakeRecorder{} // drops the Event
	}
	// The lock records on the core Events API, as controller-runtime's own
	// lock does.
	return r.p.mgr.GetEventRecorderFor(r.name) //nolint:staticcheck // see above
}

func (r lateRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.get().Event(object, eventtype, reason, message)
}

func (r lateRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.get().Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r lateRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.get().AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}
