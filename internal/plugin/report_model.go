package plugin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// Status is what `kubectl tend status` reports of one object; -o json and
// -o yaml print it as is, the default output renders it for people.
type Status struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ready is the Ready condition's status and reason, such as
	// "True (Available)"; Summary is its message.
	Ready   string `json:"ready"`
	Summary string `json:"summary,omitempty"`
	// Facts are the kind's key figures, in order.
	Facts        []Fact                       `json:"facts"`
	Members      []MemberStatus               `json:"members,omitempty"`
	Pods         []PodStatus                  `json:"pods,omitempty"`
	Roll         *etcdv1alpha1.UpdateStatus   `json:"roll,omitempty"`
	Recovery     *etcdv1alpha1.RecoveryStatus `json:"recovery,omitempty"`
	Certificates []CertificateStatus          `json:"certificates,omitempty"`
	Backups      []BackupStatus               `json:"backups,omitempty"`
	Conditions   []ConditionStatus            `json:"conditions"`
	// Warnings are the last warning Events of the object and what it owns.
	Warnings []EventStatus `json:"warnings,omitempty"`
}

// Fact is one labelled value.
type Fact struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// MemberStatus is an etcd member, as the operator last saw it and as its
// pod runs.
type MemberStatus struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Health  string `json:"health"`
	Version string `json:"version,omitempty"`
	DBSize  string `json:"dbSize,omitempty"`
	// Since is when the member's current health began: its container's
	// start while healthy, unhealthySince otherwise.
	Since    *metav1.Time `json:"since,omitempty"`
	Restarts int32        `json:"restarts"`
}

// PodStatus is one pod of a PodSet.
type PodStatus struct {
	Name     string      `json:"name"`
	Phase    string      `json:"phase"`
	Ready    bool        `json:"ready"`
	Leader   bool        `json:"leader,omitempty"`
	Node     string      `json:"node,omitempty"`
	Restarts int32       `json:"restarts"`
	Created  metav1.Time `json:"created"`
}

// CertificateStatus is one TLS Secret's expiry.
type CertificateStatus struct {
	Secret   string      `json:"secret"`
	NotAfter metav1.Time `json:"notAfter"`
}

// BackupStatus is one of a cluster's EtcdBackups.
type BackupStatus struct {
	Name      string       `json:"name"`
	Phase     string       `json:"phase"`
	Completed *metav1.Time `json:"completed,omitempty"`
	SizeBytes int64        `json:"sizeBytes,omitempty"`
	Revision  int64        `json:"revision,omitempty"`
	// Verification is "hash matches, N keys", "failed: ...", or "off".
	Verification string `json:"verification"`
}

// ConditionStatus is one condition.
type ConditionStatus struct {
	Type    string      `json:"type"`
	Status  string      `json:"status"`
	Reason  string      `json:"reason"`
	Message string      `json:"message,omitempty"`
	Since   metav1.Time `json:"since"`
}

// EventStatus is one Event.
type EventStatus struct {
	Time    metav1.Time `json:"time"`
	Object  string      `json:"object"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Count   int32       `json:"count"`
}

// maxBackups and maxWarnings bound the report's lists: the newest only.
const (
	maxBackups  = 5
	maxWarnings = 5
)

func conditionsOf(conds []metav1.Condition) []ConditionStatus {
	out := make([]ConditionStatus, 0, len(conds))
	for _, c := range conds {
		out = append(out, ConditionStatus{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime})
	}
	return out
}

// readyOf is the Ready condition for the report's headline.
func readyOf(conds []metav1.Condition) (string, string) {
	c := apimeta.FindStatusCondition(conds, "Ready")
	if c == nil {
		return "Unknown (not reconciled yet)", ""
	}
	return fmt.Sprintf("%s (%s)", c.Status, c.Reason), c.Message
}

// restarts sums a pod's container restarts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// runningSince is when a pod's first running container started.
func runningSince(p *corev1.Pod) *metav1.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			t := cs.State.Running.StartedAt
			return &t
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// EtcdClusterStatus builds the report of an EtcdCluster from the cluster,
// its member pods, its EtcdBackups and its warning Events.
func EtcdClusterStatus(c *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, backups []etcdv1alpha1.EtcdBackup, warnings []corev1.Event) Status {
	st := Status{Kind: "EtcdCluster", Namespace: c.Namespace, Name: c.Name}
	st.Ready, st.Summary = readyOf(c.Status.Conditions)
	desired := int32(0)
	if c.Spec.Replicas != nil {
		desired = *c.Spec.Replicas
	}
	leader := cmp.Or(c.Status.Leader, "none")
	st.Facts = []Fact{
		{"Phase", cmp.Or(c.Status.Phase, "-")},
		{"Members", fmt.Sprintf("%d healthy voters of %d desired", c.Status.ReadyMembers, desired)},
		{"Leader", leader},
		{"Version", fmt.Sprintf("%s (spec %s)", cmp.Or(c.Status.CurrentVersion, "-"), c.Spec.Version)},
		{"Client endpoint", cmp.Or(c.Status.ClientEndpoint, "-")},
		{"Paused", fmt.Sprint(c.Spec.Paused)},
	}
	if c.Status.RestoredFrom != nil {
		st.Facts = append(st.Facts, Fact{"Restored from", cmp.Or(c.Status.RestoredFrom.Backup, c.Status.RestoredFrom.URI)})
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	for _, m := range c.Status.Members {
		ms := MemberStatus{Name: m.Name, Role: "follower", Health: "healthy", Version: m.Version}
		switch {
		case m.Leader:
			ms.Role = "leader"
		case m.Learner:
			ms.Role = "learner"
		}
		if m.DBSize != nil {
			ms.DBSize = humanBytes(m.DBSize.Value())
		}
		p := byName[m.Name]
		if p != nil {
			ms.Restarts = restarts(p)
		}
		if m.Healthy {
			if p != nil {
				ms.Since = runningSince(p)
			}
		} else {
			ms.Health, ms.Since = "unhealthy", m.UnhealthySince
		}
		st.Members = append(st.Members, ms)
	}
	st.Roll, st.Recovery = c.Status.Update, c.Status.Recovery
	if st.Recovery != nil && st.Recovery.Phase == "Complete" && c.Status.Recovery.CompletedAt != nil {
		// The last recovery, finished: a fact, not something in progress.
		st.Facts = append(st.Facts, Fact{"Last recovery", fmt.Sprintf("%s, %s", st.Recovery.Kind, st.Recovery.CompletedAt.UTC().Format(time.RFC3339))})
		st.Recovery = nil
	}
	st.Facts = append(st.Facts, maintenanceFacts(c.Status.Maintenance)...)
	st.Facts = append(st.Facts, archiveFacts(c.Status.Archive)...)
	for _, cert := range c.Status.Certificates {
		st.Certificates = append(st.Certificates, CertificateStatus(cert))
	}
	st.Backups = backupsOf(backups)
	st.Conditions = conditionsOf(c.Status.Conditions)
	st.Warnings = eventsOf(warnings)
	return st
}

// maintenanceFacts says how the storage is kept: who compacts and the last
// compaction, the defragmentation round under way or the last, and a
// NOSPACE recovery.
func maintenanceFacts(m *etcdv1alpha1.MaintenanceStatus) []Fact {
	if m == nil {
		return nil
	}
	var facts []Fact
	if c := m.Compaction; c != nil {
		what := "by " + c.By
		if c.Retention != "" {
			what += ", keeping " + c.Retention
		}
		if c.Time != nil {
			what += fmt.Sprintf("; last to revision %d at %s", c.Revision, c.Time.UTC().Format(time.RFC3339))
		}
		facts = append(facts, Fact{"Compaction", what})
	}
	if d := m.Defragmentation; d != nil {
		what := fmt.Sprintf("%s (%s), %d of %d members", d.Phase, d.Cause, len(d.Results), len(d.Members))
		if d.Message != "" {
			what += ": " + d.Message
		}
		facts = append(facts, Fact{"Defragmentation", what})
	}
	if n := m.NoSpace; n != nil {
		facts = append(facts, Fact{"NOSPACE", fmt.Sprintf("since %s, %s: %s", n.Since.UTC().Format(time.RFC3339), n.Stage, n.Message)})
	}
	if v := m.VolumeMigration; v != nil {
		target := v.StorageClassName
		if v.Size != nil {
			target = strings.TrimPrefix(target+" "+v.Size.String(), " ")
		}
		what := fmt.Sprintf("%s to %s", v.Phase, target)
		if len(v.Remaining) > 0 {
			what += ", to move: " + strings.Join(v.Remaining, ", ")
		}
		if len(v.RetainedVolumes) > 0 {
			what += ", old volumes kept: " + strings.Join(v.RetainedVolumes, ", ")
		}
		if v.Message != "" && v.Phase != etcdv1alpha1.MigrationCompleted {
			what += ": " + v.Message
		}
		facts = append(facts, Fact{"Volume migration", what})
	}
	return facts
}

// archiveFacts say what the continuous archive holds: its window, how far
// behind it is, where it is, and the revisions it lacks.
func archiveFacts(a *etcdv1alpha1.ArchiveStatus) []Fact {
	if a == nil {
		return nil
	}
	window := "nothing stored yet"
	if a.LastRevision > 0 && a.FirstTime != nil && a.LastTime != nil {
		window = fmt.Sprintf("revisions %d (%s) to %d (%s), %d segments", a.FirstRevision, a.FirstTime.UTC().Format(time.RFC3339),
			a.LastRevision, a.LastTime.UTC().Format(time.RFC3339), a.Segments)
	}
	if a.BaseBackup != "" {
		window += fmt.Sprintf("; base %s", a.BaseBackup)
		if a.BaseRevision > 0 {
			window += fmt.Sprintf(" at revision %d", a.BaseRevision)
		}
	}
	facts := []Fact{{"Archive", window}, {"Archive lag", fmt.Sprintf("%ds", a.LagSeconds)}, {"Archive location", a.Location}}
	if a.PrunedThrough > 0 {
		facts = append(facts, Fact{"Archive pruned", fmt.Sprintf("through revision %d: no restore to a point starts from a backup before it", a.PrunedThrough)})
	}
	for _, g := range a.Gaps {
		facts = append(facts, Fact{"Archive gap", fmt.Sprintf("revisions %d to %d: %s", g.From, g.To, g.Reason)})
	}
	switch v := a.Verification; {
	case v == nil || (v.Time == nil && v.Job == ""):
		facts = append(facts, Fact{"Archive verified", "not yet"})
	case v.Time == nil:
		facts = append(facts, Fact{"Archive verified", "not yet; Job " + v.Job + " runs"})
	default:
		text := fmt.Sprintf("%s at %s, revision %d", v.Result, v.Time.UTC().Format(time.RFC3339), v.Revision)
		if v.Job != "" {
			text += "; Job " + v.Job + " runs again"
		}
		facts = append(facts, Fact{"Archive verified", text})
	}
	return facts
}

// backupsOf lists the newest backups first.
func backupsOf(backups []etcdv1alpha1.EtcdBackup) []BackupStatus {
	backups = slices.Clone(backups)
	slices.SortFunc(backups, func(a, b etcdv1alpha1.EtcdBackup) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	})
	var out []BackupStatus
	for _, b := range backups[:min(len(backups), maxBackups)] {
		bs := BackupStatus{Name: b.Name, Phase: cmp.Or(b.Status.Phase, "Pending"), Completed: b.Status.CompletionTime, Verification: "pending"}
		if a := b.Status.Artifact; a != nil {
			bs.SizeBytes = a.SizeBytes
		}
		if s := b.Status.Snapshot; s != nil {
			bs.Revision = s.Revision
		}
		switch v := b.Status.Verification; {
		case b.Spec.Verify != nil && !*b.Spec.Verify:
			bs.Verification = "off"
		case v != nil && v.HashMatches:
			bs.Verification = fmt.Sprintf("hash matches, %d keys", v.Keys)
		case v != nil:
			bs.Verification = "hash differs"
		case b.Status.Phase == etcdv1alpha1.BackupPhaseFailed:
			bs.Verification = "-"
		}
		out = append(out, bs)
	}
	return out
}

// eventsOf lists the newest Events first.
func eventsOf(events []corev1.Event) []EventStatus {
	out := make([]EventStatus, 0, len(events))
	for _, e := range events {
		out = append(out, EventStatus{
			Time:    eventTime(&e),
			Object:  e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
			Reason:  e.Reason,
			Message: e.Message,
			Count:   max(e.Count, 1),
		})
	}
	slices.SortStableFunc(out, func(a, b EventStatus) int { return b.Time.Compare(a.Time.Time) })
	return out[:min(len(out), maxWarnings)]
}

// eventTime is when an Event last happened, in either API's fields.
func eventTime(e *corev1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.CreationTimestamp
}

// PodSetStatus builds the report of a PodSet from it, its pods and its
// warning Events.
func PodSetStatus(ps *appsv1alpha1.PodSet, pods []corev1.Pod, warnings []corev1.Event) Status {
	st := Status{Kind: "PodSet", Namespace: ps.Namespace, Name: ps.Name}
	st.Ready, st.Summary = readyOf(ps.Status.Conditions)
	desired := int32(1)
	if ps.Spec.Replicas != nil {
		desired = *ps.Spec.Replicas
	}
	st.Facts = []Fact{
		{"Replicas", fmt.Sprintf("%d ready, %d running, %d desired", ps.Status.ReadyReplicas, ps.Status.Replicas, desired)},
	}
	if ps.Spec.LeaderElection {
		st.Facts = append(st.Facts, Fact{"Leader", cmp.Or(ps.Status.Leader, "none") + ", Service " + ps.Name + "-leader"})
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	for i := range pods {
		p := &pods[i]
		st.Pods = append(st.Pods, PodStatus{
			Name: p.Name, Phase: string(p.Status.Phase), Ready: podReady(p), Node: p.Spec.NodeName,
			Leader: p.Labels[appsv1alpha1.LabelRole] == "leader", Restarts: restarts(p), Created: p.CreationTimestamp,
		})
	}
	st.Conditions = conditionsOf(ps.Status.Conditions)
	st.Warnings = eventsOf(warnings)
	return st
}

// QueueStatus builds the report of a Queue from it and its warning Events.
func QueueStatus(q *sqsv1alpha1.Queue, warnings []corev1.Event) Status {
	st := Status{Kind: "Queue", Namespace: q.Namespace, Name: q.Name}
	st.Ready, st.Summary = readyOf(q.Status.Conditions)
	synced := "never"
	if q.Status.LastSyncTime != nil {
		synced = q.Status.LastSyncTime.UTC().Format(time.RFC3339)
	}
	st.Facts = []Fact{
		{"Queue name", cmp.Or(q.Spec.QueueName, q.Name)},
		{"URL", cmp.Or(q.Status.QueueURL, "-")},
		{"ARN", cmp.Or(q.Status.QueueARN, "-")},
		{"FIFO", fmt.Sprint(q.Spec.FIFOQueue)},
		{"Management", string(cmp.Or(q.Spec.ManagementPolicy, sqsv1alpha1.ManagementPolicyManage))},
		{"Messages", queueMessages(q.Status.Messages)},
		{"Last synced", synced},
	}
	if q.Status.Redrive != nil {
		st.Facts = append(st.Facts, Fact{"Redrive", RedriveProgress(q.Status.Redrive)})
	}
	st.Conditions = conditionsOf(q.Status.Conditions)
	st.Warnings = eventsOf(warnings)
	return st
}

// humanBytes writes a size in IEC units with one decimal: 20.0 KiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, units := float64(n)/unit, []string{"KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
