package etcdcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/names"
)

// defaultMemberTimeout is spec.updateStrategy.memberTimeout's default.
const defaultMemberTimeout = 5 * time.Minute

func memberTimeout(c *etcdv1alpha1.EtcdCluster) time.Duration {
	if d := c.Spec.UpdateStrategy.MemberTimeout; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return defaultMemberTimeout
}

// rollObservation is what the roll phase saw and did, for the status.
type rollObservation struct {
	// update is status.update after the pass; nil when no roll is on.
	update *etcdv1alpha1.UpdateStatus
	// finished: the roll ended this pass, or none was needed.
	finished bool
	// reason and message explain Progressing; a degraded reason (stalled,
	// blocked, check failed) also sets Degraded.
	reason, message string
	degraded        bool
}

// reconcileRoll moves the members to the current revision one at a time
// (planRoll), taking the pre-upgrade backup first for a minor upgrade and
// running the check Job after the last member. Its state lives in
// status.update and on the pods (their revision annotation), so a pass cut
// short anywhere is picked up by the next.
func (r *Reconciler) reconcileRoll(ctx context.Context, s *scope, cli Members, views []memberView, data memberData) error {
	c := s.cluster
	// The members' template as the StatefulSet gets it now, built once.
	want := statefulSet(s.template(), 0, Bootstrap{}).Spec.Template
	current := want.Annotations[etcdv1alpha1.AnnotationMemberRevision]
	if err := r.adoptUnmarkedPods(ctx, want, data.pods); err != nil {
		return err
	}
	// The pods are compared with the template they would get now (held at
	// the running version while a minor upgrade waits); the roll is
	// recorded with the revision the spec asks for.
	members, outdated, unmarked := rollMembersOf(c, views, data.pods, current)
	rev := current
	if s.target != nil {
		rev = memberRevision(c)
	}
	u := c.Status.Update.DeepCopy()
	obs := &rollObservation{update: u}
	s.obs.roll = obs
	if !outdated && u == nil && !s.upgrade.minor {
		obs.finished = true
		return nil
	}

	if s.upgrade.minor && s.upgrade.pathErr != nil {
		obs.reason, obs.degraded = etcdv1alpha1.ReasonUpgradeBlocked, true
		obs.message = fmt.Sprintf("spec.version %s is refused and no member was touched: %v", s.upgrade.to, s.upgrade.pathErr)
		return nil
	}

	if u == nil {
		cause := etcdv1alpha1.UpdateCauseSpec
		if unmarked || (c.Status.UpdatedGeneration != 0 && c.Status.UpdatedGeneration == c.Generation) {
			cause = etcdv1alpha1.UpdateCauseOperator
		}
		if cause == etcdv1alpha1.UpdateCauseOperator && !r.rolls.acquire(client.ObjectKeyFromObject(c), r.MaxOperatorRolls) {
			obs.reason = etcdv1alpha1.ReasonUpdateQueued
			obs.message = fmt.Sprintf("This version of Tend runs the members differently; %d cluster(s) are rolled at a time (--etcdcluster-max-operator-rolls) and this one waits for its turn", r.MaxOperatorRolls)
			s.requeueAfter(requeueSteady)
			return nil
		}
		u = &etcdv1alpha1.UpdateStatus{From: s.upgrade.from, To: version(c), Revision: rev, Cause: cause, StartedAt: metav1.Time{Time: s.now}}
		if u.From == "" {
			u.From = u.To
		}
		obs.update = u
		r.event(c, corev1.EventTypeNormal, "UpdateStarted", "Update", "Rolling the members to revision %s (%s to %s, cause %s), one at a time", rev, u.From, u.To, cause)
	} else if u.Revision != rev {
		r.event(c, corev1.EventTypeNormal, "UpdateRetargeted", "Update", "The spec changed during the roll: rolling to revision %s (%s) instead of %s", rev, version(c), u.Revision)
		u.Revision, u.To, u.CheckJob = rev, version(c), ""
	}
	if keepsRollSlot(c, u) {
		r.rolls.keep(client.ObjectKeyFromObject(c))
	}

	if s.upgrade.minor {
		u.Backup = upgradeBackupName(c)
	}
	if s.upgrade.hold() {
		return r.reconcileUpgradeBackup(ctx, s, u, obs)
	}

	action := planRoll(rollInput{
		members:     members,
		inHand:      u.Member,
		inHandSince: timeOf(u.MemberSince),
		timeout:     memberTimeout(c),
		now:         s.now,
	})
	u.UpdatedMembers, u.PendingMembers = nil, nil
	for _, m := range members {
		if m.Updated && m.Healthy {
			u.UpdatedMembers = append(u.UpdatedMembers, m.Name)
		} else if !m.Updated && !m.PodGone {
			u.PendingMembers = append(u.PendingMembers, m.Name)
		}
	}
	obs.reason, obs.message = etcdv1alpha1.ReasonUpdating, action.message
	s.requeueAfter(requeueStep)
	switch action.kind {
	case rollDone:
		return r.reconcileCheckJob(ctx, s, u, obs)
	case rollWait:
	case rollStalled:
		// It goes on only once someone acts: its slot goes to the next
		// cluster meanwhile, and it takes one again when it moves.
		r.rolls.release(client.ObjectKeyFromObject(c))
		obs.reason, obs.degraded = etcdv1alpha1.ReasonUpdateStalled, true
		obs.message = fmt.Sprintf("%s. The roll stopped: no other member is touched. Read the pod's events and logs (kubectl describe pod -n %s %s); "+
			"correct the spec (for example the image or version) and Tend restarts %s with it and goes on", action.message, c.Namespace, action.member.Name, action.member.Name)
		if prev := c.Status.Update; prev == nil || !stalledBefore(c) {
			r.event(c, corev1.EventTypeWarning, "UpdateStalled", "Update", "%s; the roll stopped", action.message)
		}
		s.requeueAfter(requeueUnreachable)
	case rollRestart:
		if err := r.ensureLiveTemplate(ctx, s, views, current); err != nil {
			return err
		}
		if pod := data.pods[action.member.Name]; pod != nil {
			if err := r.deleteExactly(ctx, "pod", pod); err != nil {
				return fmt.Errorf("restarting member %s: %w", action.member.Name, err)
			}
		}
		u.Member, u.MemberSince = action.member.Name, &metav1.Time{Time: s.now}
		r.event(c, corev1.EventTypeNormal, "MemberRestarted", "RestartMember", "%s to run revision %s", action.message, rev)
	case rollMoveLeader:
		moveCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if err := cli.MoveLeader(moveCtx, action.to); err != nil {
			return fmt.Errorf("%s: %w", action.message, err)
		}
		r.event(c, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader", "%s", action.message)
		if err := r.recordLeaderMove(ctx, s, u); err != nil {
			return err
		}
	}
	return nil
}

// recordLeaderMove counts the leadership move just made in the live
// status at once, rather than in the pass's status write at the end: that
// write fails with a conflict when the cache had not seen the last one,
// and the move has happened whatever it does. The pass then writes its
// status on top of the live object it read.
func (r *Reconciler) recordLeaderMove(ctx context.Context, s *scope, u *etcdv1alpha1.UpdateStatus) error {
	key := client.ObjectKeyFromObject(s.cluster)
	var live *etcdv1alpha1.EtcdCluster
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live = &etcdv1alpha1.EtcdCluster{}
		if err := r.APIReader.Get(ctx, key, live); err != nil {
			return err
		}
		base := live.DeepCopy()
		moves := int32(1)
		if lu := live.Status.Update; lu != nil && lu.Revision == u.Revision {
			moves = lu.LeaderMoves + 1
		} else {
			live.Status.Update = u.DeepCopy()
		}
		live.Status.Update.LeaderMoves = moves
		return r.Status().Patch(ctx, live, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("recording the leader move in the status: %w", err)
	}
	u.LeaderMoves = live.Status.Update.LeaderMoves
	s.cluster.ResourceVersion, s.before.ResourceVersion = live.ResourceVersion, live.ResourceVersion
	s.cluster.Status, s.before.Status = *live.Status.DeepCopy(), *live.Status.DeepCopy()
	return nil
}

// ensureLiveTemplate makes sure the StatefulSet in the apiserver, not
// only the cache, has the template of the current revision before a pod
// is deleted: the pass skipped its template write when its cached
// StatefulSet already looked current, and a cache that lagged a change
// (this one, or one made and undone since) would have the pod come back
// on the template before, for a restart more.
func (r *Reconciler) ensureLiveTemplate(ctx context.Context, s *scope, views []memberView, want string) error {
	live := &appsv1.StatefulSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.sts), live); err != nil {
		return fmt.Errorf("reading StatefulSet %s: %w", s.sts.Name, err)
	}
	if live.Spec.Template.Annotations[etcdv1alpha1.AnnotationMemberRevision] == want {
		return nil
	}
	s.sts = live
	delete(s.sts.Annotations, annotationTemplateHash) // write it, whatever the hash says
	return r.syncStatefulSet(ctx, s, statefulSetSize(views), bootstrapOf(views))
}

// stalledBefore tells whether the last status already said the roll
// stalled, so that the Warning Event is recorded once per stall.
func stalledBefore(c *etcdv1alpha1.EtcdCluster) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == etcdv1alpha1.ConditionDegraded && cond.Reason == etcdv1alpha1.ReasonUpdateStalled && cond.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// keepsRollSlot tells whether the roll u of c holds one of the slots of
// operator-caused rolls: one under way does, also after a restart of the
// manager; one that stalled (a member that did not come back, a check Job
// that failed) waits for a person without one, so that it does not hold
// every other cluster's roll for ever.
func keepsRollSlot(c *etcdv1alpha1.EtcdCluster, u *etcdv1alpha1.UpdateStatus) bool {
	return u.Cause == etcdv1alpha1.UpdateCauseOperator && !stalledBefore(c) && !checkFailedBefore(c)
}

// checkFailedBefore tells whether the last status said the roll's check
// Job failed.
func checkFailedBefore(c *etcdv1alpha1.EtcdCluster) bool {
	d := apimeta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	return d != nil && d.Status == metav1.ConditionTrue && d.Reason == etcdv1alpha1.ReasonUpdateCheckFailed
}

// reconcileCheckJob runs the check Job once every member runs the
// revision, and ends the roll when it succeeds.
func (r *Reconciler) reconcileCheckJob(ctx context.Context, s *scope, u *etcdv1alpha1.UpdateStatus, obs *rollObservation) error {
	c := s.cluster
	name := checkJobName(c, u.Revision)
	u.CheckJob, u.Member, u.MemberSince = name, "", nil
	u.PendingMembers = nil
	job, err := r.ownedJob(ctx, c, name)
	switch {
	case err == nil && job == nil:
		if err := r.createOwned(ctx, c, checkJob(c, name, r.AgentImage)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		r.event(c, corev1.EventTypeNormal, "CheckingUpdate", "CreateJob", "Every member runs revision %s; Job %s checks health, version %s and equal hashes", u.Revision, name, u.To)
		obs.reason, obs.message = etcdv1alpha1.ReasonCheckingUpdate, fmt.Sprintf("Every member runs the new revision; Job %s checks the cluster", name)
		return nil
	case err != nil:
		return fmt.Errorf("the check Job: %w", err)
	}
	switch state, msg := jobStateOf(job); state {
	case jobComplete:
		r.event(c, corev1.EventTypeNormal, "UpdateComplete", "Update", "Every member runs %s (revision %s), checked by Job %s; %d leader move(s)", u.To, u.Revision, name, u.LeaderMoves)
		r.rolls.release(client.ObjectKeyFromObject(c))
		obs.update, obs.finished = nil, true
		obs.reason, obs.message = "", ""
	case jobFailed:
		r.rolls.release(client.ObjectKeyFromObject(c)) // as a stalled roll
		obs.reason, obs.degraded = etcdv1alpha1.ReasonUpdateCheckFailed, true
		obs.message = fmt.Sprintf("Every member runs the new revision, but the check Job %s failed (%s). Read its logs (kubectl logs -n %s job/%s); delete the Job to check again", name, msg, c.Namespace, name)
	default:
		obs.reason, obs.message = etcdv1alpha1.ReasonCheckingUpdate, fmt.Sprintf("Every member runs the new revision; Job %s checks the cluster", name)
	}
	return nil
}

// checkJobName is the check Job of the roll to rev.
func checkJobName(c *etcdv1alpha1.EtcdCluster, rev string) string {
	return names.Child(c.Name, "-check-"+rev[:min(8, len(rev))], names.Job)
}

// rollMembersOf pairs the members with their pods: whether each runs rev.
// outdated is set when a member's pod runs another revision; unmarked when
// a pod carries no revision at all (made by a Tend older than the roll).
func rollMembersOf(c *etcdv1alpha1.EtcdCluster, views []memberView, pods map[string]*corev1.Pod, rev string) (members []rollMember, outdated, unmarked bool) {
	for _, v := range views {
		if v.Ordinal < 0 {
			continue
		}
		m := rollMember{memberView: v}
		p := pods[v.Name]
		switch {
		case p == nil || p.DeletionTimestamp != nil:
			m.PodGone = true
		default:
			m.PodCreated = p.CreationTimestamp.Time
			have, ok := p.Annotations[etcdv1alpha1.AnnotationMemberRevision]
			m.Updated = have == rev
			outdated = outdated || !m.Updated
			unmarked = unmarked || !ok
		}
		members = append(members, m)
	}
	return members, outdated, unmarked
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// rollSlots bounds how many clusters roll at once because Tend changed
// (not their spec): a new Tend must not restart every member everywhere
// at the same moment. It is a bound, not a record: after a restart, the
// rolls under way (status.update) take their slots back.
type rollSlots struct {
	mu    sync.Mutex
	taken map[types.NamespacedName]bool
}

// acquire takes a slot for key if fewer than limit are taken.
func (s *rollSlots) acquire(key types.NamespacedName, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken[key] {
		return true
	}
	if len(s.taken) >= max(limit, 1) {
		return false
	}
	s.keepLocked(key)
	return true
}

// keep marks key's roll as holding a slot, whatever the bound.
func (s *rollSlots) keep(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepLocked(key)
}

func (s *rollSlots) keepLocked(key types.NamespacedName) {
	if s.taken == nil {
		s.taken = map[types.NamespacedName]bool{}
	}
	s.taken[key] = true
}

// release frees key's slot.
func (s *rollSlots) release(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.taken, key)
}
