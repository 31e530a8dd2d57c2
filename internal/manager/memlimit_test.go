package manager

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestSoftMemoryLimit(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		name    string
		percent int
		env     map[string]string
		want    int64
		why     string
		err     string
	}{
		{name: "90% of a 512Mi limit", percent: 90, env: map[string]string{"MEMORY_LIMIT": "536870912"}, want: 483183820, why: "90% of the container's memory limit of 536870912 bytes"},
		{name: "100% is the limit itself", percent: 100, env: map[string]string{"MEMORY_LIMIT": "268435456"}, want: 268435456},
		{name: "GOMEMLIMIT wins", percent: 90, env: map[string]string{"MEMORY_LIMIT": "536870912", "GOMEMLIMIT": "300MiB"}, why: "GOMEMLIMIT=300MiB is set"},
		{name: "0 sets none", percent: 0, env: map[string]string{"MEMORY_LIMIT": "536870912"}, why: "is 0"},
		{name: "no limit known", percent: 90, env: map[string]string{}, why: "MEMORY_LIMIT is not set"},
		{name: "a quantity with a unit is refused", percent: 90, env: map[string]string{"MEMORY_LIMIT": "512Mi"}, err: `MEMORY_LIMIT="512Mi": want the container's memory limit in bytes`},
		{name: "a zero limit is refused", percent: 90, env: map[string]string{"MEMORY_LIMIT": "0"}, err: "want the container's memory limit in bytes"},
		{name: "above 100% is refused", percent: 150, env: map[string]string{"MEMORY_LIMIT": "536870912"}, err: "--soft-memory-limit-percent=150: want 0 (none) to 100"},
		{name: "a negative percent is refused", percent: -1, env: map[string]string{}, err: "want 0 (none) to 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, why, err := softMemoryLimit(tc.percent, env(tc.env))
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
			g.Expect(why).To(ContainSubstring(tc.why))
		})
	}
}
