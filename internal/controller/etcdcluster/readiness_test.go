package etcdcluster

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

func TestReadinessOf(t *testing.T) {
	// conds builds conditions from "Type=Status/Reason" terms.
	conds := func(terms ...string) []metav1.Condition {
		var out []metav1.Condition
		for _, term := range terms {
			typ, rest, _ := strings.Cut(term, "=")
			status, reason, _ := strings.Cut(rest, "/")
			out = append(out, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: "msg of " + typ})
		}
		return out
	}
	healthy := []string{"Available=True/QuorumHealthy", "Progressing=False/Stable", "Degraded=False/AsExpected"}
	with := func(extra ...string) []string { return append(append([]string{}, healthy...), extra...) }
	for _, tc := range []struct {
		name    string
		change  func(*etcdv1alpha1.EtcdCluster)
		conds   []string
		state   readiness.State
		reason  string
		message string
	}{
		{name: "healthy", conds: healthy, state: readiness.StateReady, reason: "QuorumHealthy", message: "msg of Available"},
		{name: "an even member count is a warning, not a gap",
			conds: []string{"Available=True/QuorumHealthy", "Progressing=False/Stable", "Degraded=True/EvenMembers"},
			state: readiness.StateReady, reason: "QuorumHealthy"},
		{name: "restored from a backup", conds: with("Restored=True/RestoredFromBackup"), state: readiness.StateReady, reason: "QuorumHealthy"},
		{name: "first pass not done", conds: nil, state: readiness.StateReconciling, reason: "Unknown", message: "Waiting for the first pass"},
		{name: "creating", conds: []string{"Available=False/Bootstrapping", "Progressing=True/Creating", "Degraded=False/AsExpected"},
			state: readiness.StateReconciling, reason: "Creating", message: "msg of Progressing"},
		{name: "scaling out", conds: []string{"Available=True/QuorumHealthy", "Progressing=True/ScalingOut", "Degraded=False/AsExpected"},
			state: readiness.StateReconciling, reason: "ScalingOut"},
		{name: "members unreachable", conds: []string{"Available=False/Unreachable", "Progressing=Unknown/Unreachable", "Degraded=False/AsExpected"},
			state: readiness.StateReconciling, reason: "Unreachable"},
		{name: "quorum lost, nothing planned", conds: []string{"Available=False/QuorumLost", "Progressing=False/Stable", "Degraded=True/MembersUnhealthy"},
			state: readiness.StateReconciling, reason: "QuorumLost"},
		{name: "an unhealthy member, replaced in time", conds: []string{"Available=True/QuorumHealthy", "Progressing=False/Stable", "Degraded=True/MembersUnhealthy"},
			state: readiness.StateReconciling, reason: "MembersUnhealthy", message: "msg of Degraded"},
		{name: "a restore in progress", conds: with("Restored=Unknown/Restoring"), state: readiness.StateReconciling, reason: "Restoring"},
		{name: "an upgrade path etcd does not support", conds: []string{"Available=True/QuorumHealthy", "Progressing=False/UpgradeBlocked", "Degraded=True/UpgradeBlocked"},
			state: readiness.StateStalled, reason: "UpgradeBlocked", message: "msg of Degraded"},
		{name: "a stalled roll", conds: []string{"Available=True/QuorumHealthy", "Progressing=False/UpdateStalled", "Degraded=True/UpdateStalled"},
			state: readiness.StateStalled, reason: "UpdateStalled"},
		{name: "invalid TLS Secrets", conds: []string{"Available=Unknown/InvalidTLSSecrets", "Progressing=Unknown/InvalidTLSSecrets", "Degraded=True/InvalidTLSSecrets"},
			state: readiness.StateStalled, reason: "InvalidTLSSecrets"},
		{name: "an alarm", conds: []string{"Available=True/QuorumHealthy", "Progressing=False/Stable", "Degraded=True/Alarm"},
			state: readiness.StateStalled, reason: "Alarm"},
		{name: "members cannot start", conds: []string{"Available=False/Bootstrapping", "Progressing=True/Creating", "Degraded=True/MembersCannotStart"},
			state: readiness.StateStalled, reason: "MembersCannotStart"},
		{name: "a recovery plan waits for approval",
			conds: []string{"Available=False/QuorumLost", "Progressing=False/Stable", "Degraded=True/RecoveryPlanned"},
			state: readiness.StateStalled, reason: "RecoveryPlanned"},
		{name: "a recovery plan that Tend runs by itself",
			change: func(c *etcdv1alpha1.EtcdCluster) { c.Spec.QuorumLoss.Policy = etcdv1alpha1.QuorumLossAuto },
			conds:  []string{"Available=False/QuorumLost", "Progressing=False/Stable", "Degraded=True/RecoveryPlanned"},
			state:  readiness.StateReconciling, reason: "QuorumLost"},
		{name: "paused", change: func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Paused = true },
			conds: []string{"Available=True/QuorumHealthy", "Progressing=False/Paused", "Degraded=False/AsExpected"},
			state: readiness.StateNotReady, reason: "Paused"},
		{name: "paused, and stuck: the person must know", change: func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Paused = true },
			conds: []string{"Available=True/QuorumHealthy", "Progressing=False/Paused", "Degraded=True/Alarm"},
			state: readiness.StateStalled, reason: "Alarm"},
		{name: "deleting, waiting for the final snapshot", change: func(c *etcdv1alpha1.EtcdCluster) { c.DeletionTimestamp = &metav1.Time{} },
			conds: with("Deleting=True/TakingFinalSnapshot"), state: readiness.StateReconciling, reason: "TakingFinalSnapshot"},
		{name: "deleting, the final snapshot failed", change: func(c *etcdv1alpha1.EtcdCluster) { c.DeletionTimestamp = &metav1.Time{} },
			conds: with("Deleting=True/FinalSnapshotFailed"), state: readiness.StateStalled, reason: "FinalSnapshotFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := &etcdv1alpha1.EtcdCluster{}
			c.Spec.QuorumLoss.Policy = etcdv1alpha1.QuorumLossManual
			if tc.change != nil {
				tc.change(c)
			}
			got := readinessOf(c, conds(tc.conds...))
			g.Expect(got.State).To(Equal(tc.state))
			g.Expect(got.Reason).To(Equal(tc.reason))
			if tc.message != "" {
				g.Expect(got.Message).To(Equal(tc.message))
			}
		})
	}
}
