package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// etcdTimeout bounds the etcd calls of a pass, and observeTimeout the
// status check among them: a member that does not answer within it is
// unhealthy, and a pass that reaches none comes back soon.
const (
	etcdTimeout    = 10 * time.Second
	observeTimeout = 5 * time.Second
)

// annotationMemberID on a member's PVC is the ID of the member whose data
// it holds, set once that member has been seen healthy. A volume whose
// member has left etcd holds data that must never start again.
const annotationMemberID = "etcd.tend.dev/member-id"

// reconcileMembers observes the members through etcd and makes at most one
// membership change, then keeps the StatefulSet and the volumes in line with
// the membership.
func (r *Reconciler) reconcileMembers(ctx context.Context, s *scope) error {
	c := s.cluster
	if s.sts == nil {
		return nil // paused before it was made
	}
	data, err := r.observeData(ctx, c, s.sts)
	if err != nil {
		return err
	}
	if s.obs.startProblems, err = r.observeStartProblems(ctx, s, data); err != nil {
		return err
	}
	cli, err := r.connectMembers(ctx, s, data)
	if err != nil {
		return err
	}
	if cli == nil {
		s.obs.unreachable = errors.New("no member pod has an IP address yet")
		s.requeueAfter(requeueUnreachable)
		return nil
	}
	callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	defer func() { _ = cli.Close() }()
	observeCtx, cancelObserve := context.WithTimeout(callCtx, observeTimeout)
	defer cancelObserve()
	statuses, err := cli.Status(observeCtx)
	if err != nil {
		s.obs.unreachable = err
		s.requeueAfter(requeueUnreachable)
		return nil
	}
	data.formed = s.obs.jobCreated
	views := markDataLoss(viewsOf(c, statuses, s.now), c.Status.Members, data)
	s.obs.members = views
	all, sts := split(views)
	s.obs.healthyQuorum = etcd.HealthyQuorum(all, sts)
	if c.Spec.Paused {
		s.requeueAfter(requeueSteady)
		return nil
	}
	if !s.obs.healthyQuorum && !data.formed.IsZero() {
		if started, err := r.reconcileQuorumLoss(ctx, s, views, data); err != nil || started {
			return err
		}
	}
	if s.upgrade, err = r.observeUpgrade(ctx, c, views); err != nil {
		return err
	}
	s.target = templateCluster(c, s.upgrade, runningImage(s.sts))
	// The cluster exists: members that start afresh join it. This comes
	// before the step, which may delete a pod for the StatefulSet to
	// recreate; the step's own changes are synced after it.
	if err := r.syncStatefulSet(ctx, s, statefulSetSize(views), bootstrapOf(views)); err != nil {
		return err
	}
	if (c.Spec.Auth.Enabled || restoring(c)) && s.obs.healthyQuorum {
		if err := r.enableAuth(callCtx, s, cli); err != nil {
			return err
		}
	}

	next := planMembers(c, views, s.now)
	if next.kind != stepNone && r.MemberChangeInterval > 0 {
		if wait := r.untilTick(client.ObjectKeyFromObject(c), s.now); wait > 0 {
			next = step{kind: stepWait, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("%s, at the next look in %s (one look per %s)", next.message, wait.Round(time.Second), r.MemberChangeInterval)}
			s.requeueAfter(wait)
		} else {
			s.requeueAfter(r.MemberChangeInterval)
		}
	}
	views, err = r.takeStep(callCtx, s, cli, next, views)
	if err != nil {
		return err
	}
	s.obs.members = views
	if err := r.syncStatefulSet(ctx, s, statefulSetSize(views), bootstrapOf(views)); err != nil {
		return err
	}
	if err := r.reconcileVolumes(ctx, s, views, data.pvcs); err != nil {
		return err
	}
	if s.obs.step.kind == stepNone {
		if err := r.reconcileRoll(ctx, s, cli, views, data); err != nil {
			return err
		}
	}
	s.requeueAfter(healthRequeue(c, views, s.now))
	return nil
}

// runningImage is the etcd image of the members' current template.
func runningImage(sts *appsv1.StatefulSet) string {
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == "etcd" {
			return ctr.Image
		}
	}
	return ""
}

// dialer connects to members at their pods' IPs, and to other addresses
// through DNS. The cluster DNS may deny that a new member's name exists for
// as long as it caches negative answers (30s by default): etcd asks for it
// as soon as the member is added, before its pod exists. The certificates
// are still checked against the members' names. It also lets a manager
// outside the cluster reach the members, where pod IPs are routed.
func dialer(ips map[string]string) func(context.Context, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if ip, ok := ips[host]; ok {
				addr = net.JoinHostPort(ip, port)
			}
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// takeStep makes the change next, records it as an Event, and returns the
// members as they are after it. A change that etcd refuses for now (the
// cluster is not ready for it) turns into a wait.
func (r *Reconciler) takeStep(ctx context.Context, s *scope, cli Members, next step, views []memberView) ([]memberView, error) {
	c := s.cluster
	s.obs.step = next
	if next.kind == stepNone {
		return views, nil
	}
	s.requeueAfter(requeueStep)
	if next.kind == stepWait {
		return views, nil
	}
	m := next.member
	var err error
	switch next.kind {
	case stepPromote:
		if err = cli.Promote(ctx, m.ID); err == nil {
			r.event(c, corev1.EventTypeNormal, "MemberPromoted", "PromoteMember", "Promoted learner %s (%s) to a voting member", m.Name, m.ID)
			views = replaceView(views, m.ID, func(v *memberView) { v.IsLearner = false })
		}
	case stepMoveLeader:
		if err = cli.MoveLeader(ctx, next.to); err == nil {
			r.event(c, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader", "Moved the leadership from %s to member %s before removing %s", m.Name, next.to, m.Name)
		}
	case stepRemove:
		if err = cli.Remove(ctx, m.ID); err == nil {
			r.event(c, corev1.EventTypeNormal, "MemberRemoved", "RemoveMember", "Removed member %s (%s): the spec asks for %d members", m.Name, m.ID, replicas(c))
			views = removeView(views, m.ID)
		}
	case stepAddLearner:
		views, err = r.addLearner(ctx, s, cli, next.ordinal, views)
	case stepReplace:
		if err = cli.Remove(ctx, m.ID); err != nil {
			break
		}
		why := "unhealthy since " + m.UnhealthySince.UTC().Format(time.RFC3339)
		if m.DataLost {
			why = "which lost its data"
		}
		r.event(c, corev1.EventTypeWarning, "ReplacingMember", "RemoveMember", "Removed member %s (%s), %s; adding it anew with empty data", m.Name, m.ID, why)
		views = removeView(views, m.ID)
		views, err = r.addLearner(ctx, s, cli, m.Ordinal, views)
	}
	if err == nil {
		return views, nil
	}
	if etcd.Refused(err) {
		s.obs.step = step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers, message: fmt.Sprintf("%s: etcd refused for now: %v", next.message, err)}
		return views, nil
	}
	return views, fmt.Errorf("%s: %w", next.message, err)
}

// addLearner adds the member at ordinal as a learner. When the ordinal's
// pod may exist already (the member is being replaced), its pod and volume
// are deleted, so that it starts again with empty data and joins as the
// new learner.
func (r *Reconciler) addLearner(ctx context.Context, s *scope, cli Members, ordinal int, views []memberView) ([]memberView, error) {
	c := s.cluster
	name := memberName(c, ordinal)
	m, err := cli.AddLearner(ctx, peerURL(c, name))
	if err != nil {
		return views, err
	}
	r.event(c, corev1.EventTypeNormal, "MemberAdded", "AddMember", "Added member %s (%s) as a learner", name, m.ID)
	views = append(views, memberView{MemberStatus: etcd.MemberStatus{Member: m}, Name: name, Ordinal: ordinal})
	if int32(ordinal) < ptr.Deref(s.sts.Spec.Replicas, 0) {
		// The pod comes back from the template at once, and etcd reads
		// its bootstrap settings once: they must name the new learner
		// first. The membership before may not have named this ordinal
		// (after a recovery from a survivor), and a pod told the old one
		// fails until its learner is given up.
		if err := r.syncStatefulSet(ctx, s, statefulSetSize(views), bootstrapOf(views)); err != nil {
			return views, err
		}
		if err := r.deleteMemberData(ctx, s, ordinal); err != nil {
			return views, err
		}
	}
	return views, nil
}

// enableAuth turns on etcd's authentication with the root user, before
// the init Job exists (it checks the root login); afterwards it is done. A
// cluster restored from a backup has the old cluster's auth: it is made to
// match the spec and the new root Secret.
func (r *Reconciler) enableAuth(ctx context.Context, s *scope, cli Members) error {
	if s.obs.job != jobNone {
		return nil
	}
	c := s.cluster
	if err := applyAuth(ctx, c, cli, s.rootPassword, restoring(c)); err != nil || !c.Spec.Auth.Enabled {
		return err
	}
	r.event(c, corev1.EventTypeNormal, "AuthEnabled", "EnableAuth", "Enabled authentication; the root user's password is in Secret %s", RootSecretName(c))
	return nil
}

// applyAuth makes the members' authentication what c's spec asks, with
// rootPassword for root. Restored data brings the old cluster's auth and
// root password: with restored set, auth is turned off when the spec has
// none, and the password is set anew.
func applyAuth(ctx context.Context, c *etcdv1alpha1.EtcdCluster, cli Members, rootPassword string, restored bool) error {
	if !c.Spec.Auth.Enabled {
		if !restored {
			return nil
		}
		if err := cli.DisableAuth(ctx); err != nil {
			return fmt.Errorf("disabling the restored data's authentication: %w", err)
		}
		return nil
	}
	if err := cli.EnableAuth(ctx, rootPassword); err != nil {
		return fmt.Errorf("enabling authentication: %w", err)
	}
	if restored {
		if err := cli.SetRootPassword(ctx, rootPassword); err != nil {
			return fmt.Errorf("setting the restored data's root password: %w", err)
		}
	}
	return nil
}

// deleteMemberData deletes the member's volume claim and then its pod: the
// claim stays until the pod is gone, and the StatefulSet then makes both
// anew, empty.
func (r *Reconciler) deleteMemberData(ctx context.Context, s *scope, ordinal int) error {
	c := s.cluster
	if !c.Spec.Storage.Ephemeral {
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvcName(c, ordinal)}, pvc)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("reading volume claim %s: %w", pvcName(c, ordinal), err)
		}
		if err == nil {
			if _, ours := isMemberPVC(c, pvc); !ours {
				return notOurs(c, "PersistentVolumeClaim", pvc)
			}
			if err := r.deleteExactly(ctx, "volume claim", pvc); err != nil {
				return err
			}
		}
	}
	name := memberName(c, ordinal)
	pod := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading pod %s: %w", name, err)
	}
	if err == nil {
		if !isMemberPod(c, s.sts, pod) {
			return notOurs(c, "Pod", pod)
		}
		if err := r.deleteExactly(ctx, "pod", pod); err != nil {
			return err
		}
	}
	r.event(c, corev1.EventTypeNormal, "MemberDataDeleted", "DeleteMemberData", "Deleted pod %s and its data: it starts again empty and joins as a new member", name)
	return nil
}

// viewsOf places the members etcd reports in the StatefulSet and times
// their ill health from the last status (for a learner that has not
// started, the time since Tend first saw it).
func viewsOf(c *etcdv1alpha1.EtcdCluster, statuses []etcd.MemberStatus, now time.Time) []memberView {
	views := make([]memberView, 0, len(statuses))
	for _, st := range statuses {
		v := memberView{MemberStatus: st, Name: st.Name, Ordinal: -1}
		if v.Name == "" && len(st.PeerURLs) > 0 {
			v.Name, _ = memberNameOfPeerURL(c, st.PeerURLs[0])
		}
		if i, ok := memberOrdinal(c, v.Name); ok {
			v.Ordinal = i
		}
		if !st.Healthy {
			v.UnhealthySince = unhealthySince(c, v.Name, st.ID.String(), now)
		}
		views = append(views, v)
	}
	return views
}

// unhealthySince is when the last status first saw the member unhealthy,
// or now.
func unhealthySince(c *etcdv1alpha1.EtcdCluster, name, id string, now time.Time) time.Time {
	for _, m := range c.Status.Members {
		if m.Name == name && m.ID == id && m.UnhealthySince != nil {
			return m.UnhealthySince.Time
		}
	}
	return now
}

// healthRequeue is when the next health check is due: soon while a member
// is unhealthy, at the moment its replacement would be due, else the
// steady interval.
func healthRequeue(c *etcdv1alpha1.EtcdCluster, views []memberView, now time.Time) time.Duration {
	policy := replacementOf(c)
	next := requeueSteady
	for _, v := range views {
		if v.UnhealthySince.IsZero() {
			continue
		}
		next = min(next, requeueUnreachable)
		if due := v.UnhealthySince.Add(policy.after).Sub(now); policy.auto && due > 0 {
			next = min(next, due)
		}
	}
	return next
}

func replaceView(views []memberView, id etcd.MemberID, change func(*memberView)) []memberView {
	for i := range views {
		if views[i].ID == id {
			change(&views[i])
		}
	}
	return views
}

func removeView(views []memberView, id etcd.MemberID) []memberView {
	out := views[:0:0]
	for _, v := range views {
		if v.ID != id {
			out = append(out, v)
		}
	}
	return out
}
