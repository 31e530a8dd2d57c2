package etcd

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestB13Figures(t *testing.T) {
	g := NewWithT(t)
	f := &b13Figures{revisions: 100000, members: 3, alone: []float64{20, 22, 21}, replayed: []float64{60, 62, 71}, restored: []float64{40, 41, 50}}
	var sb strings.Builder
	f.write(&sb)
	g.Expect(sb.String()).To(ContainSubstring("| the replay's cost: each round's difference of the two | s | 3 | 40.0 | 40.0 | 50.0 |"))
	g.Expect(sb.String()).To(ContainSubstring("| revisions replayed per second of that cost (every member replays at once) | rev/s | 3 | 2000 | 2500 | 2500 |"))
	g.Expect(f.metrics()).To(HaveKeyWithValue("replay_cost_s", 40.0))
}
