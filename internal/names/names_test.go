package names

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestChild(t *testing.T) {
	long := strings.Repeat("a", 52)
	for _, tc := range []struct {
		name, parent, suffix string
		limit                int
		want                 string
	}{
		{name: "fits: unchanged", parent: "kv", suffix: "-check-1a2b3c4d", limit: Job, want: "kv-check-1a2b3c4d"},
		{name: "exactly at the limit: unchanged", parent: strings.Repeat("b", 48), suffix: "-check-1a2b3c4d", limit: Job,
			want: strings.Repeat("b", 48) + "-check-1a2b3c4d"},
		{name: "one over: cut and hashed", parent: strings.Repeat("b", 49), suffix: "-check-1a2b3c4d", limit: Job},
		{name: "longest cluster, quorum-loss restore", parent: long, suffix: "-quorum-loss-t4xyz0", limit: EtcdRestore},
		{name: "a dash at the cut is dropped", parent: strings.Repeat("c", 30) + "-" + strings.Repeat("d", 30), suffix: "-upgrade-3-6-16", limit: EtcdBackup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Child(tc.parent, tc.suffix, tc.limit)
			if tc.want != "" {
				g.Expect(got).To(Equal(tc.want))
			}
			g.Expect(len(got)).To(BeNumerically("<=", tc.limit))
			g.Expect(got).To(HaveSuffix(tc.suffix), "the suffix stays whole: it says what the object is for")
			g.Expect(validation.IsDNS1123Label(got)).To(BeEmpty(), "%q", got)
			g.Expect(Child(tc.parent, tc.suffix, tc.limit)).To(Equal(got), "the same inputs give the same name")
		})
	}
}

func TestChildTellsCutNamesApart(t *testing.T) {
	g := NewWithT(t)
	// Two parents that differ only past the cut get different names.
	a := Child(strings.Repeat("x", 52)+"a", "-final-12345678", EtcdBackup)
	b := Child(strings.Repeat("x", 52)+"b", "-final-12345678", EtcdBackup)
	g.Expect(a).NotTo(Equal(b))
	g.Expect(strings.HasPrefix(a, strings.Repeat("x", 10))).To(BeTrue())
}
