package podspec

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestActiveDeadline(t *testing.T) {
	g := NewWithT(t)
	g.Expect(*ActiveDeadline(0)).To(BeEquivalentTo(15 * 60))
	g.Expect(*ActiveDeadline(-1)).To(BeEquivalentTo(15 * 60))
	g.Expect(*ActiveDeadline(1 << 30)).To(BeEquivalentTo(23 * 60))
	g.Expect(*ActiveDeadline(8 << 30)).To(BeEquivalentTo((15 + 64) * 60))
	g.Expect(*ActiveDeadline(3 << 29)).To(BeEquivalentTo(27*60), "1.5 GiB")
}

func TestPodFailurePolicyIgnoresDisruptions(t *testing.T) {
	g := NewWithT(t)
	p := PodFailurePolicy(3)
	g.Expect(p.Rules).To(HaveLen(2))
	g.Expect(p.Rules[0].OnExitCodes.Values).To(ConsistOf(int32(3)))
	g.Expect(p.Rules[1].OnPodConditions[0].Type).To(Equal(corev1.DisruptionTarget))
}
