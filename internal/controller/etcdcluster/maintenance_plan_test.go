package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestCompactionOf(t *testing.T) {
	tests := []struct {
		name   string
		spec   func(*etcdv1alpha1.EtcdClusterSpec)
		want   compaction
		status string
	}{
		{name: "the default: Tend keeps an hour", want: compaction{by: compactedByTend, retention: time.Hour}, status: "1h0m0s"},
		{name: "etcd compacts by itself", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Options.AutoCompactionMode = "periodic" },
			want: compaction{by: compactedByEtcd}},
		{name: "disabled", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Policy: etcdv1alpha1.CompactionDisabled}
		}, want: compaction{by: compactedByNone}},
		{name: "a retention", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Retention: &metav1.Duration{Duration: 10 * time.Minute}}
		}, want: compaction{by: compactedByTend, retention: 10 * time.Minute}, status: "10m0s"},
		{name: "a count of revisions", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Revisions: ptr.To[int64](5000)}
		}, want: compaction{by: compactedByTend, revisions: 5000}, status: "5000 revisions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := compactionOf(testCluster(tt.spec))
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got.String()).To(Equal(tt.status))
		})
	}
}

// TestRecordRevision: a sample a tenth of the retention, and only those a
// compaction may still need are kept.
func TestRecordRevision(t *testing.T) {
	g := NewWithT(t)
	p := compaction{by: compactedByTend, retention: time.Hour}
	var samples []revisionSample
	for m := 0; m <= 150; m++ { // a pass a minute for 150 minutes, ten writes a minute
		samples = recordRevision(samples, p, t0.Add(time.Duration(m)*time.Minute), int64(10*m+1))
	}
	now := t0.Add(150 * time.Minute)
	g.Expect(len(samples)).To(BeNumerically("<=", 12), "a sample per 6 minutes over an hour")
	g.Expect(now.Sub(samples[0].at)).To(BeNumerically(">=", time.Hour), "the oldest is a retention old")
	g.Expect(now.Sub(samples[1].at)).To(BeNumerically("<", time.Hour), "and no older sample is kept")
	rev, ok := planCompaction(compactionInput{policy: p, samples: samples, current: 1501, now: now})
	g.Expect(ok).To(BeTrue())
	g.Expect(rev).To(Equal(samples[0].rev))
	g.Expect(rev).To(BeNumerically(">=", 1501-10*66), "at most a tenth of the retention more than asked is dropped")

	restored := recordRevision(samples, p, now.Add(7*time.Minute), 3)
	g.Expect(restored).To(Equal([]revisionSample{{at: now.Add(7 * time.Minute), rev: 3}}), "a restore starts the log over")
}

func TestPlanCompaction(t *testing.T) {
	hour := compaction{by: compactedByTend, retention: time.Hour}
	old := []revisionSample{{at: t0.Add(-90 * time.Minute), rev: 40}, {at: t0.Add(-61 * time.Minute), rev: 50}, {at: t0.Add(-time.Minute), rev: 90}}
	tests := []struct {
		name string
		in   compactionInput
		want int64 // 0: none
	}{
		{name: "to the revision seen a retention ago", in: compactionInput{policy: hour, samples: old, current: 100}, want: 50},
		{name: "nothing is a retention old yet", in: compactionInput{policy: hour, samples: old[2:], current: 100}},
		{name: "compacted there already", in: compactionInput{policy: hour, samples: old, current: 100, compacted: 50}},
		{name: "compacted within the hour", in: compactionInput{policy: hour, samples: old, current: 100, compacted: 20, compactedTime: t0.Add(-30 * time.Minute)}},
		{name: "compacted over an hour ago", in: compactionInput{policy: hour, samples: old, current: 100, compacted: 20, compactedTime: t0.Add(-61 * time.Minute)}, want: 50},
		{name: "a short retention compacts as often", in: compactionInput{policy: compaction{by: compactedByTend, retention: 10 * time.Minute},
			samples: []revisionSample{{at: t0.Add(-11 * time.Minute), rev: 70}}, current: 100, compacted: 60, compactedTime: t0.Add(-10 * time.Minute)}, want: 70},
		{name: "never above the floor", in: compactionInput{policy: hour, samples: old, current: 100, floor: 45}, want: 45},
		{name: "the floor below the last compaction: nothing", in: compactionInput{policy: hour, samples: old, current: 100, floor: 45, compacted: 45}},
		{name: "by revisions", in: compactionInput{policy: compaction{by: compactedByTend, revisions: 1000}, current: 5000, compacted: 3000}, want: 4000},
		{name: "by revisions, compacted within five minutes", in: compactionInput{policy: compaction{by: compactedByTend, revisions: 1000}, current: 5000, compacted: 3000,
			compactedTime: t0.Add(-4 * time.Minute)}},
		{name: "by revisions, compacted over five minutes ago", in: compactionInput{policy: compaction{by: compactedByTend, revisions: 1000}, current: 5000, compacted: 3000,
			compactedTime: t0.Add(-6 * time.Minute)}, want: 4000},
		{name: "by revisions, moved less than a tenth", in: compactionInput{policy: compaction{by: compactedByTend, revisions: 1000}, current: 5000, compacted: 3950}},
		{name: "by revisions, not that many yet", in: compactionInput{policy: compaction{by: compactedByTend, revisions: 1000}, current: 900}},
		{name: "etcd compacts", in: compactionInput{policy: compaction{by: compactedByEtcd}, samples: old, current: 100}},
		{name: "disabled", in: compactionInput{policy: compaction{by: compactedByNone}, samples: old, current: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tt.in.now = t0
			rev, ok := planCompaction(tt.in)
			g.Expect(ok).To(Equal(tt.want != 0))
			if tt.want != 0 {
				g.Expect(rev).To(Equal(tt.want))
			}
		})
	}
}

// sized is m with a database of db bytes, inUse of them in use.
func sized(m memberView, db, inUse int64) memberView {
	m.DBSize, m.DBSizeInUse = db, inUse
	return m
}

func TestPlanDefrag(t *testing.T) {
	const mi = 1 << 20
	auto := defragOf(testCluster(nil), t0)
	three := func() []memberView { // member 1 leads
		return []memberView{sized(member(0, 1), 400*mi, 100*mi), sized(member(1, 1), 400*mi, 100*mi), sized(member(2, 1), 150*mi, 140*mi)}
	}
	names := func(ms []memberView, order ...int) []string {
		var out []string
		for _, i := range order {
			out = append(out, ms[i].Name)
		}
		return out
	}
	ms := three()
	running := func(order []string, done ...string) *etcdv1alpha1.DefragmentationStatus {
		r := &etcdv1alpha1.DefragmentationStatus{Cause: etcdv1alpha1.DefragmentationRequested, Request: "a", Phase: etcdv1alpha1.DefragmentationRunning, Members: order}
		for _, d := range done {
			r.Results = append(r.Results, etcdv1alpha1.DefragmentationResult{Member: d})
		}
		return r
	}
	every := names(ms, 0, 2, 1)
	weekly, err := defragOfSchedule("0 3 * * 0")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      defragInput
		kind    defragKind
		cause   etcdv1alpha1.DefragmentationCause
		members []string
		member  string // the member to defragment, or to move the leadership from
		to      string
	}{
		{name: "past the threshold: those members, the leader last", in: defragInput{settings: auto, members: ms},
			kind: defragStart, cause: etcdv1alpha1.DefragmentationThreshold, members: names(ms, 0, 1)},
		{name: "below the minimum size: nothing", in: defragInput{settings: auto, members: []memberView{sized(member(0, 0), 90*mi, 10*mi)}}},
		{name: "disabled: nothing by threshold", in: defragInput{settings: defragSettings{percent: 45, minimum: 100 * mi}, members: ms}},
		{name: "disabled, but asked: every member", in: defragInput{settings: defragSettings{}, members: ms, request: "t1"},
			kind: defragStart, cause: etcdv1alpha1.DefragmentationRequested, members: every},
		{name: "asked before, and done: nothing", in: defragInput{settings: defragSettings{}, members: ms, request: "t1",
			round: &etcdv1alpha1.DefragmentationStatus{Request: "t1", Phase: etcdv1alpha1.DefragmentationCompleted}}},
		{name: "a stalled round stops the threshold", in: defragInput{settings: auto, members: ms,
			round: &etcdv1alpha1.DefragmentationStatus{Phase: etcdv1alpha1.DefragmentationStalled}}},
		{name: "a stalled round stops a NOSPACE round too", in: defragInput{settings: auto, members: ms, noSpace: etcdv1alpha1.NoSpaceRetention,
			round: &etcdv1alpha1.DefragmentationStatus{Phase: etcdv1alpha1.DefragmentationStalled}}},
		{name: "a stalled round, asked again", in: defragInput{settings: auto, members: ms, request: "t2",
			round: &etcdv1alpha1.DefragmentationStatus{Request: "t1", Phase: etcdv1alpha1.DefragmentationStalled}},
			kind: defragStart, cause: etcdv1alpha1.DefragmentationRequested, members: every},
		{name: "NOSPACE: every member", in: defragInput{settings: defragSettings{}, members: ms, noSpace: etcdv1alpha1.NoSpaceRetention},
			kind: defragStart, cause: etcdv1alpha1.DefragmentationNoSpace, members: every},
		{name: "a schedule's run since the cluster was made", in: defragInput{settings: weekly, members: ms, created: t0.Add(-8 * 24 * time.Hour)},
			kind: defragStart, cause: etcdv1alpha1.DefragmentationSchedule, members: every},
		{name: "the schedule's last run was taken", in: defragInput{settings: weekly, members: []memberView{sized(member(0, 0), 10*mi, 9*mi)}, created: t0.Add(-8 * 24 * time.Hour),
			round: &etcdv1alpha1.DefragmentationStatus{Phase: etcdv1alpha1.DefragmentationCompleted, LastScheduleTime: &metav1.Time{Time: t0.Add(-time.Minute)}}}},
		{name: "a round: the first follower", in: defragInput{settings: auto, members: ms, round: running(every)}, kind: defragMember, member: ms[0].Name},
		{name: "a round: the next follower", in: defragInput{settings: auto, members: ms, round: running(every, ms[0].Name)}, kind: defragMember, member: ms[2].Name},
		{name: "a round: the leader hands over to the member done last", in: defragInput{settings: auto, members: ms, round: running(every, ms[0].Name, ms[2].Name)},
			kind: defragMove, member: ms[1].Name, to: ms[2].Name},
		{name: "a round whose first member now leads: a follower first", in: defragInput{settings: auto, members: ms,
			round: running(names(ms, 1, 2, 0))}, kind: defragMember, member: ms[2].Name},
		{name: "a round: all done", in: defragInput{settings: auto, members: ms, round: running(every, every...)}, kind: defragFinish},
		{name: "a round waits for an unhealthy member", in: defragInput{settings: auto, members: []memberView{ms[0], ms[1], sick(2, t0)}, round: running(every)}, kind: defragWait},
		{name: "a lone member is defragmented as it leads", in: defragInput{settings: auto, members: []memberView{member(0, 0)}, round: running(names(ms, 0))},
			kind: defragMember, member: ms[0].Name},
		{name: "a member removed meanwhile is skipped", in: defragInput{settings: auto, members: ms[:2], round: running(every, ms[0].Name)},
			kind: defragMove, member: ms[1].Name, to: ms[0].Name},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			if tt.in.now.IsZero() {
				tt.in.now = t0
			}
			got := planDefrag(tt.in)
			g.Expect(got.kind).To(Equal(tt.kind), "why: %s", got.why)
			g.Expect(got.cause).To(Equal(tt.cause))
			g.Expect(got.members).To(Equal(tt.members))
			if tt.member != "" {
				g.Expect(got.member.Name).To(Equal(tt.member))
			}
			if tt.to != "" {
				g.Expect(got.to.Name).To(Equal(tt.to))
			}
		})
	}
}

// defragOfSchedule is the default settings with a schedule.
func defragOfSchedule(line string) (defragSettings, error) {
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Maintenance.Defragmentation = &etcdv1alpha1.Defragmentation{Schedule: etcdv1alpha1.CronSchedule(line)}
	})
	s := defragOf(c, t0)
	return s, s.scheduleErr
}

func TestPlanNoSpace(t *testing.T) {
	const quota = 100 << 20
	since := metav1.NewTime(t0.Add(-time.Minute))
	stage := func(s string, compacted int64) *etcdv1alpha1.NoSpaceStatus {
		return &etcdv1alpha1.NoSpaceStatus{Since: since, Stage: s, CompactedTo: compacted}
	}
	round := func(stage, phase string, after ...int64) *etcdv1alpha1.DefragmentationStatus {
		r := &etcdv1alpha1.DefragmentationStatus{Cause: etcdv1alpha1.DefragmentationNoSpace, Request: stage, Phase: phase, StartedAt: metav1.NewTime(t0)}
		for _, a := range after {
			r.Results = append(r.Results, etcdv1alpha1.DefragmentationResult{After: *resource.NewQuantity(a, resource.BinarySI)})
		}
		return r
	}
	base := noSpaceInput{alarm: true, retention: 500, current: 900, mayCompactAll: true, quota: quota}
	tests := []struct {
		name   string
		change func(*noSpaceInput)
		kind   noSpaceKind
		stage  string
		rev    int64
	}{
		{name: "no alarm, nothing under way", change: func(in *noSpaceInput) { in.alarm = false }},
		{name: "the alarm gone (a person disarmed): the recovery ends", change: func(in *noSpaceInput) {
			in.alarm, in.status = false, stage(etcdv1alpha1.NoSpaceRetention, 500)
		}, kind: noSpaceDone},
		{name: "Manual: wait", change: func(in *noSpaceInput) { in.policy = etcdv1alpha1.NoSpaceManual }, kind: noSpaceWait, stage: etcdv1alpha1.NoSpaceWaiting},
		{name: "first: compact to the retention", kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceRetention, rev: 500},
		{name: "nothing a retention old: the stage starts without compacting", change: func(in *noSpaceInput) { in.retention = 0 },
			kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceRetention},
		{name: "nothing a retention old, and the data fills the quota: straight to the current revision", change: func(in *noSpaceInput) {
			in.retention, in.inUse = 0, 95<<20
		}, kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceCurrent, rev: 900},
		{name: "nothing a retention old, the data fills the quota, compaction Disabled: the retention stage", change: func(in *noSpaceInput) {
			in.retention, in.inUse, in.mayCompactAll = 0, 95<<20, false
		}, kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceRetention},
		{name: "then its round", change: func(in *noSpaceInput) { in.status = stage(etcdv1alpha1.NoSpaceRetention, 500) },
			kind: noSpaceDefrag, stage: etcdv1alpha1.NoSpaceRetention},
		{name: "an older recovery's round is not this one's", change: func(in *noSpaceInput) {
			in.status = stage(etcdv1alpha1.NoSpaceRetention, 500)
			in.round = round(etcdv1alpha1.NoSpaceRetention, etcdv1alpha1.DefragmentationCompleted, 10)
			in.round.StartedAt = metav1.NewTime(t0.Add(-time.Hour))
		}, kind: noSpaceDefrag, stage: etcdv1alpha1.NoSpaceRetention},
		{name: "the round goes on", change: func(in *noSpaceInput) {
			in.status, in.round = stage(etcdv1alpha1.NoSpaceRetention, 500), round(etcdv1alpha1.NoSpaceRetention, etcdv1alpha1.DefragmentationRunning, 10<<20)
		}, kind: noSpaceDefrag, stage: etcdv1alpha1.NoSpaceRetention},
		{name: "the round freed enough: disarm", change: func(in *noSpaceInput) {
			in.status, in.round = stage(etcdv1alpha1.NoSpaceRetention, 500), round(etcdv1alpha1.NoSpaceRetention, etcdv1alpha1.DefragmentationCompleted, 10<<20, 11<<20, 10<<20)
		}, kind: noSpaceDisarm, stage: etcdv1alpha1.NoSpaceRetention},
		{name: "the retention freed too little: compact to the current revision", change: func(in *noSpaceInput) {
			in.status, in.round = stage(etcdv1alpha1.NoSpaceRetention, 500), round(etcdv1alpha1.NoSpaceRetention, etcdv1alpha1.DefragmentationRunning, 95<<20)
		}, kind: noSpaceCompact, stage: etcdv1alpha1.NoSpaceCurrent, rev: 900},
		{name: "compaction Disabled: never to the current revision", change: func(in *noSpaceInput) {
			in.mayCompactAll = false
			in.status, in.round = stage(etcdv1alpha1.NoSpaceRetention, 500), round(etcdv1alpha1.NoSpaceRetention, etcdv1alpha1.DefragmentationRunning, 95<<20)
		}, kind: noSpaceTooLarge, stage: etcdv1alpha1.NoSpaceTooLarge},
		{name: "the current revision freed too little: too large", change: func(in *noSpaceInput) {
			in.status, in.round = stage(etcdv1alpha1.NoSpaceCurrent, 900), round(etcdv1alpha1.NoSpaceCurrent, etcdv1alpha1.DefragmentationRunning, 95<<20)
		}, kind: noSpaceTooLarge, stage: etcdv1alpha1.NoSpaceTooLarge},
		{name: "too large stays so", change: func(in *noSpaceInput) { in.status, in.largest = stage(etcdv1alpha1.NoSpaceTooLarge, 900), 95<<20 },
			kind: noSpaceTooLarge, stage: etcdv1alpha1.NoSpaceTooLarge},
		{name: "too large, and the quota was raised: disarm", change: func(in *noSpaceInput) {
			in.status, in.largest, in.quota = stage(etcdv1alpha1.NoSpaceTooLarge, 900), 95<<20, 200<<20
		}, kind: noSpaceDisarm, stage: etcdv1alpha1.NoSpaceTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := base
			if tt.change != nil {
				tt.change(&in)
			}
			got := planNoSpace(in)
			g.Expect(got).To(Equal(noSpaceStep{kind: tt.kind, stage: tt.stage, rev: tt.rev}))
		})
	}
}

func TestPlanVolumes(t *testing.T) {
	const gi = 1 << 30
	claim := func(name string, request, capacity int64, canExpand bool, resizing string) claimView {
		return claimView{name: name, request: request, capacity: capacity, class: "fast", canExpand: canExpand, resizing: resizing}
	}
	otherClass := func(v claimView) claimView {
		v.otherClass = true
		return v
	}
	tests := []struct {
		name   string
		claims []claimView
		want   volumeStep
	}{
		{name: "at size", claims: []claimView{claim("data-kv-0", 2*gi, 2*gi, false, "")}},
		{name: "smaller, the class can grow", claims: []claimView{claim("data-kv-1", gi, gi, true, ""), claim("data-kv-0", gi, gi, true, "")},
			want: volumeStep{grow: []string{"data-kv-0", "data-kv-1"}}},
		{name: "smaller, the class cannot grow: the member moves", claims: []claimView{claim("data-kv-0", gi, gi, false, "")},
			want: volumeStep{migrate: []claimView{claim("data-kv-0", gi, gi, false, "")}}},
		{name: "of another class: the member moves, even when its class could grow", claims: []claimView{otherClass(claim("data-kv-1", gi, gi, true, "")), claim("data-kv-0", 2*gi, 2*gi, false, "")},
			want: volumeStep{migrate: []claimView{otherClass(claim("data-kv-1", gi, gi, true, ""))}}},
		{name: "asked, the volume not there yet", claims: []claimView{claim("data-kv-0", 2*gi, gi, true, "FileSystemResizePending: waiting for the node")},
			want: volumeStep{resizing: []string{"data-kv-0: 1Gi of 2Gi (FileSystemResizePending: waiting for the node)"}}},
		{name: "asked and grown", claims: []claimView{claim("data-kv-0", 2*gi, 2*gi, true, "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(planVolumes(2*gi, tt.claims)).To(Equal(tt.want))
		})
	}
}

func TestBackupInFlight(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status}
	}
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{name: "just made", want: true},
		{name: "written, verification off", conds: []metav1.Condition{cond(etcdv1alpha1.BackupComplete, metav1.ConditionTrue)}},
		{name: "written, verifying", conds: []metav1.Condition{cond(etcdv1alpha1.BackupComplete, metav1.ConditionTrue), cond(etcdv1alpha1.BackupVerified, metav1.ConditionUnknown)}, want: true},
		{name: "verified", conds: []metav1.Condition{cond(etcdv1alpha1.BackupComplete, metav1.ConditionTrue), cond(etcdv1alpha1.BackupVerified, metav1.ConditionTrue)}},
		{name: "failed", conds: []metav1.Condition{cond(etcdv1alpha1.BackupFailed, metav1.ConditionTrue)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &etcdv1alpha1.EtcdBackup{Status: etcdv1alpha1.EtcdBackupStatus{Conditions: tt.conds}}
			NewWithT(t).Expect(backupInFlight(b)).To(Equal(tt.want))
		})
	}
}

// TestCompactionLooksAgainSoon: the pages a compaction frees may start a
// defragmentation round, so the pass that compacts asks for the next look
// within requeueStep, not at the idle cluster's interval.
func TestCompactionLooksAgainSoon(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	fm := &fakeMembers{clusters: map[string]*fakeCluster{}}
	fc := fm.add(c, memberName(c, 0))
	r := &Reconciler{Recorder: events.NewFakeRecorder(10)}
	s := &scope{cluster: c, now: t0, cli: &fakeClient{f: fm, fc: fc}}
	w := &world{}
	w.maint.compaction = compaction{by: compactedByTend, revisions: 1000}
	g.Expect(r.runCompact(context.Background(), s, w, decision{compact: 4000})).To(Succeed())
	g.Expect(fc.compactions).To(Equal([]int64{4000}))
	g.Expect(w.maint.status.Compaction.Revision).To(BeEquivalentTo(4000))
	g.Expect(s.requeue).To(Equal(requeueStep))
}
