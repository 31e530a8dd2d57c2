package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/cronline"
)

// The pure decisions of storage maintenance: when to compact and to
// which revision, which member to defragment next, and the steps of a
// NOSPACE recovery. The operations that carry them out are
// op_compact.go, op_defragment.go and op_no_space.go.

// Defaults of spec.maintenance, where the spec leaves them out.
const (
	defaultRetention = time.Hour
	// defaultFragmentation and defaultMinimumSize follow OpenShift's etcd
	// operator, which defragments past 45% free pages on databases of at
	// least 100 MB.
	defaultFragmentation = 45
	defaultMinimumSize   = 100 << 20
	defaultDefragTimeout = 2 * time.Minute
	// noSpaceHeadroom is the share of the quota that the data may fill
	// once a NOSPACE recovery is done; above it, the alarm would come
	// back at once, and the recovery says so instead of disarming.
	noSpaceHeadroom = 90
)

// Who compacts a cluster's history.
const (
	compactedByTend = "Tend"
	compactedByEtcd = "etcd"
	compactedByNone = "None"
)

// compaction is how a cluster's history is kept.
type compaction struct {
	by string
	// retention, or revisions, is what Tend keeps.
	retention time.Duration
	revisions int64
}

// compactionOf reads spec.maintenance.compaction, with its defaults: Tend
// keeps an hour unless etcd compacts by itself (options.autoCompactionMode).
func compactionOf(c *etcdv1alpha1.EtcdCluster) compaction {
	spec := c.Spec.Maintenance.Compaction
	switch {
	case spec == nil && c.Spec.Options.AutoCompactionMode != "":
		return compaction{by: compactedByEtcd}
	case spec != nil && spec.Policy == etcdv1alpha1.CompactionDisabled:
		return compaction{by: compactedByNone}
	case spec != nil && spec.Revisions != nil:
		return compaction{by: compactedByTend, revisions: *spec.Revisions}
	case spec != nil && spec.Retention != nil:
		return compaction{by: compactedByTend, retention: spec.Retention.Duration}
	}
	return compaction{by: compactedByTend, retention: defaultRetention}
}

// String is the retention as status shows it.
func (p compaction) String() string {
	switch {
	case p.by != compactedByTend:
		return ""
	case p.revisions > 0:
		return strconv.FormatInt(p.revisions, 10) + " revisions"
	}
	return p.retention.String()
}

// sampleEvery is how often the revision log keeps a sample: a tenth of
// the retention, as etcd's own periodic compactor does, so that a
// compaction drops at most a tenth of the retention more than asked.
func (p compaction) sampleEvery() time.Duration { return p.retention / 10 }

// revisionSample is the cluster's revision at a time.
type revisionSample struct {
	at  time.Time
	rev int64
}

// recordRevision adds the revision rev seen at now to samples (oldest
// first) when the newest is older than a sample period, and drops the
// samples that no compaction needs any more: all but the newest that is
// at least retention old.
func recordRevision(samples []revisionSample, p compaction, now time.Time, rev int64) []revisionSample {
	if n := len(samples); n == 0 || now.Sub(samples[n-1].at) >= p.sampleEvery() || rev < samples[n-1].rev {
		if n > 0 && rev < samples[n-1].rev {
			samples = nil // a restore started the revisions over
		}
		samples = append(samples, revisionSample{at: now, rev: rev})
	}
	cut := 0
	for i, s := range samples {
		if now.Sub(s.at) >= p.retention {
			cut = i
		}
	}
	return slices.Clone(samples[cut:])
}

// compactionInput is what the choice of a compaction rests on.
type compactionInput struct {
	policy compaction
	// samples are the revisions seen over time (retention), current the
	// cluster's revision now (revisions).
	samples []revisionSample
	current int64
	// compacted is the revision Tend last compacted to, and when.
	compacted     int64
	compactedTime time.Time
	// floor, when not zero, is a revision that history must be kept from:
	// Tend never compacts above it.
	floor int64
	now   time.Time
}

// revisionCompactionEvery is how often a count of revisions is compacted,
// as etcd's revision compactor does.
const revisionCompactionEvery = 5 * time.Minute

// planCompaction is the revision to compact to now, or false: the
// policy's target (compactionTarget), with a retention at most once per
// retention or hour, whichever is shorter (as etcd's periodic compactor),
// with a count of revisions at most every five minutes and once the target
// moved by a tenth of the count. A busy cluster is not compacted every
// pass: the other operations get their turn.
func planCompaction(in compactionInput) (int64, bool) {
	since := in.now.Sub(in.compactedTime)
	switch p := in.policy; {
	case p.by != compactedByTend:
		return 0, false
	case p.revisions > 0:
		if in.current-p.revisions-in.compacted < max(p.revisions/10, 1) || (!in.compactedTime.IsZero() && since < revisionCompactionEvery) {
			return 0, false
		}
	case !in.compactedTime.IsZero() && since < min(p.retention, time.Hour):
		return 0, false
	}
	target := compactionTarget(in)
	return target, target > in.compacted && target > 1
}

// compactionTarget is the revision that the policy keeps the history
// from now, 0 when there is none yet: with a retention, the newest
// revision seen at least that long ago; with a count, the current revision
// less the count. It is never above the floor.
func compactionTarget(in compactionInput) int64 {
	var target int64
	switch p := in.policy; {
	case p.by != compactedByTend:
		return 0
	case p.revisions > 0:
		target = in.current - p.revisions
	default:
		for _, s := range in.samples {
			if in.now.Sub(s.at) >= p.retention {
				target = s.rev
			}
		}
	}
	if in.floor > 0 {
		target = min(target, in.floor)
	}
	return max(target, 0)
}

// defragSettings is spec.maintenance.defragmentation, with its defaults.
type defragSettings struct {
	auto     bool
	percent  int64
	minimum  int64
	timeout  time.Duration
	schedule *cronline.Schedule
	// scheduleErr is why the schedule does not parse (the CRD should have
	// refused it).
	scheduleErr error
}

// defragOf reads spec.maintenance.defragmentation.
func defragOf(c *etcdv1alpha1.EtcdCluster, now time.Time) defragSettings {
	s := defragSettings{auto: true, percent: defaultFragmentation, minimum: defaultMinimumSize, timeout: defaultDefragTimeout}
	spec := c.Spec.Maintenance.Defragmentation
	if spec == nil {
		return s
	}
	s.auto = spec.Policy != etcdv1alpha1.DefragmentationDisabled
	if spec.FragmentationPercent != nil {
		s.percent = int64(*spec.FragmentationPercent)
	}
	if spec.MinimumSize != nil {
		s.minimum = spec.MinimumSize.Value()
	}
	if spec.Timeout != nil && spec.Timeout.Duration > 0 {
		s.timeout = spec.Timeout.Duration
	}
	if spec.Schedule != "" {
		sched, err := cronline.Parse(string(spec.Schedule), time.UTC, now)
		if err != nil {
			s.scheduleErr = fmt.Errorf("spec.maintenance.defragmentation.schedule %q: %w", spec.Schedule, err)
		} else {
			s.schedule = &sched
		}
	}
	return s
}

// fragmented tells whether m's free pages pass the threshold.
func (s defragSettings) fragmented(m memberView) bool {
	return m.Answered && m.DBSize >= s.minimum && m.DBSize > 0 && (m.DBSize-m.DBSizeInUse)*100 >= s.percent*m.DBSize
}

// defragKind is one step of defragmentation.
type defragKind int

const (
	defragNone   defragKind = iota // nothing to do
	defragWait                     // a round runs but may not go on now; why says why
	defragStart                    // start a round of members, for cause
	defragMove                     // move the leadership to member `to` first
	defragMember                   // defragment member
	defragFinish                   // every member of the round is done
)

// defragStep is planDefrag's answer.
type defragStep struct {
	kind    defragKind
	why     string
	cause   etcdv1alpha1.DefragmentationCause
	request string
	// members are a new round's, in order; schedule the schedule's run
	// that starts it.
	members  []string
	schedule time.Time
	// member is the one to defragment; to the one to hand the leadership.
	member memberView
	to     memberView
}

// defragInput is what planDefrag decides on.
type defragInput struct {
	settings defragSettings
	// round is the round under way or the last one, from status.
	round *etcdv1alpha1.DefragmentationStatus
	// request is the etcd.tend.dev/defragment annotation's value.
	request string
	// noSpace, when set, is the stage of the NOSPACE recovery that asks
	// for a round of every member; the round records it as its request.
	noSpace string
	members []memberView
	// created is when the cluster was made: a schedule's first run comes
	// after it.
	created, now time.Time
}

// planDefrag is the next step of defragmentation: go on with the round
// under way, or start one (asked for, for NOSPACE, on schedule, or for the
// members past the threshold), or nothing. One member at a time, only
// while every member is healthy; followers first, and the leader last,
// once it handed its leadership to a member the round already did.
func planDefrag(in defragInput) defragStep {
	if r := in.round; r != nil && r.Phase == etcdv1alpha1.DefragmentationRunning {
		return continueRound(in)
	}
	start := func(cause etcdv1alpha1.DefragmentationCause, members []memberView) defragStep {
		return defragStep{kind: defragStart, cause: cause, request: in.request, members: roundOrder(members)}
	}
	asked := in.request != "" && (in.round == nil || in.round.Request != in.request)
	switch {
	case asked:
		return start(etcdv1alpha1.DefragmentationRequested, in.members)
	case in.round != nil && in.round.Phase == etcdv1alpha1.DefragmentationStalled:
		return defragStep{} // until a person asks again
	case in.noSpace != "":
		s := start(etcdv1alpha1.DefragmentationNoSpace, in.members)
		s.request = in.noSpace
		return s
	case !in.settings.auto:
		return defragStep{}
	}
	if due := scheduleDue(in); !due.IsZero() {
		s := start(etcdv1alpha1.DefragmentationSchedule, in.members)
		s.schedule = due
		return s
	}
	var over []memberView
	for _, m := range in.members {
		if in.settings.fragmented(m) {
			over = append(over, m)
		}
	}
	if len(over) > 0 {
		return start(etcdv1alpha1.DefragmentationThreshold, over)
	}
	return defragStep{}
}

// scheduleDue is the schedule's latest run since the last that started a
// round (or since the cluster was made), zero when none is due.
func scheduleDue(in defragInput) time.Time {
	if in.settings.schedule == nil {
		return time.Time{}
	}
	after := in.created
	if r := in.round; r != nil && r.LastScheduleTime != nil && r.LastScheduleTime.After(after) {
		after = r.LastScheduleTime.Time
	}
	return in.settings.schedule.Last(after, in.now)
}

// roundOrder names members in the order a round takes them: followers by
// name, the leader last.
func roundOrder(members []memberView) []string {
	ordered := slices.Clone(members)
	slices.SortFunc(ordered, func(a, b memberView) int {
		return cmp.Or(cmp.Compare(boolRank(a.IsLeader()), boolRank(b.IsLeader())), cmp.Compare(a.Name, b.Name))
	})
	names := make([]string, len(ordered))
	for i, m := range ordered {
		names[i] = m.Name
	}
	return names
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// continueRound is the next step of the round under way.
func continueRound(in defragInput) defragStep {
	r := in.round
	byName := make(map[string]memberView, len(in.members))
	for _, m := range in.members {
		if !m.Healthy {
			return defragStep{kind: defragWait, why: fmt.Sprintf("member %s is unhealthy", m.Name)}
		}
		byName[m.Name] = m
	}
	done := make(map[string]bool, len(r.Results))
	for _, res := range r.Results {
		done[res.Member] = true
	}
	var left []memberView
	for _, name := range r.Members {
		if m, ok := byName[name]; ok && !done[name] {
			left = append(left, m) // a member removed meanwhile is skipped
		}
	}
	if len(left) == 0 {
		return defragStep{kind: defragFinish}
	}
	for _, m := range left {
		if !m.IsLeader() {
			return defragStep{kind: defragMember, member: m}
		}
	}
	leader := left[0]
	if len(in.members) == 1 {
		return defragStep{kind: defragMember, member: leader} // nobody to hand the leadership
	}
	return defragStep{kind: defragMove, member: leader, to: transferee(in.members, leader, r.Results)}
}

// transferee is who takes the leadership from leader before its
// defragmentation: the voter the round did last, else any other voter.
func transferee(members []memberView, leader memberView, results []etcdv1alpha1.DefragmentationResult) memberView {
	var voters []memberView
	for _, m := range members {
		if m.ID != leader.ID && !m.IsLearner {
			voters = append(voters, m)
		}
	}
	for i := len(results) - 1; i >= 0; i-- {
		for _, m := range voters {
			if m.Name == results[i].Member {
				return m
			}
		}
	}
	if len(voters) == 0 {
		return memberView{}
	}
	return voters[0]
}

// noSpaceKind is one step of a NOSPACE recovery.
type noSpaceKind int

const (
	noSpaceNone     noSpaceKind = iota // no alarm, and no recovery to end
	noSpaceWait                        // Manual: report, wait for a person
	noSpaceCompact                     // compact to rev, at stage
	noSpaceDefrag                      // go on with the round of every member
	noSpaceTooLarge                    // the data alone is too large: report
	noSpaceDisarm                      // every member has room: disarm
	noSpaceDone                        // the alarm is gone: end the recovery
)

// noSpaceStep is planNoSpace's answer.
type noSpaceStep struct {
	kind  noSpaceKind
	stage string
	rev   int64
}

// noSpaceInput is what planNoSpace decides on.
type noSpaceInput struct {
	alarm  bool
	policy etcdv1alpha1.NoSpacePolicy
	// status is the recovery under way; round the defragmentation round.
	status *etcdv1alpha1.NoSpaceStatus
	round  *etcdv1alpha1.DefragmentationStatus
	// retention is the compaction's revision by the retention (0: none);
	// current the cluster's revision; mayCompactAll: compacting to the
	// current revision is allowed (Tend compacts this cluster).
	retention, current int64
	mayCompactAll      bool
	quota              int64
	// largest is the largest member database now, and inUse the most
	// data any member holds in its database.
	largest, inUse int64
}

// planNoSpace is the next step of a NOSPACE recovery: compact to the
// retention's revision and defragment every member; if a defragmented
// member's database is still near the quota, compact to the current
// revision and defragment again; if it is still near, report that the data
// alone is too large. Disarm only once every member has room.
func planNoSpace(in noSpaceInput) noSpaceStep {
	st := in.status
	switch {
	case !in.alarm && st == nil:
		return noSpaceStep{}
	case !in.alarm:
		return noSpaceStep{kind: noSpaceDone}
	case in.policy == etcdv1alpha1.NoSpaceManual:
		return noSpaceStep{kind: noSpaceWait, stage: etcdv1alpha1.NoSpaceWaiting}
	case (st == nil || st.Stage == etcdv1alpha1.NoSpaceWaiting) && in.retention == 0 && in.inUse >= in.quota*noSpaceHeadroom/100 && in.mayCompactAll && in.current > 0:
		// Nothing is a retention old, and a member's data alone is near
		// the quota: a defragmentation could not make room.
		return noSpaceStep{kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceCurrent, rev: in.current}
	case st == nil || st.Stage == etcdv1alpha1.NoSpaceWaiting:
		return noSpaceStep{kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceRetention, rev: in.retention}
	case st.Stage == etcdv1alpha1.NoSpaceTooLarge && in.largest < in.quota*noSpaceHeadroom/100:
		// The quota was raised: every member has room now.
		return noSpaceStep{kind: noSpaceDisarm, stage: st.Stage}
	case st.Stage == etcdv1alpha1.NoSpaceTooLarge:
		return noSpaceStep{kind: noSpaceTooLarge, stage: st.Stage}
	}
	r := in.round
	if r == nil || r.Cause != etcdv1alpha1.DefragmentationNoSpace || r.Request != st.Stage || r.StartedAt.Before(&st.Since) {
		return noSpaceStep{kind: noSpaceDefrag, stage: st.Stage} // this stage's round starts
	}
	limit := in.quota * noSpaceHeadroom / 100
	for _, res := range r.Results {
		if res.After.Value() < limit {
			continue
		}
		if st.Stage == etcdv1alpha1.NoSpaceRetention && in.mayCompactAll && in.current > st.CompactedTo {
			return noSpaceStep{kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceCurrent, rev: in.current}
		}
		return noSpaceStep{kind: noSpaceTooLarge, stage: etcdv1alpha1.NoSpaceTooLarge}
	}
	if r.Phase == etcdv1alpha1.DefragmentationCompleted {
		return noSpaceStep{kind: noSpaceDisarm, stage: st.Stage}
	}
	return noSpaceStep{kind: noSpaceDefrag, stage: st.Stage}
}

// clusterRevision is the highest revision a member answered with.
func clusterRevision(members []memberView) int64 {
	var rev int64
	for _, m := range members {
		rev = max(rev, m.Revision)
	}
	return rev
}
