package etcd

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestB12Goals(t *testing.T) {
	g := NewWithT(t)
	f := &b12Figures{size: 256e6, quota: 64e6,
		tendElections: []float64{0, 0, 0}, anchorElections: []float64{0, 1, 0},
		tendGap: []float64{0.2, 0.3, 0.25}, anchorGap: []float64{1.5, 2.0, 1.8},
		tendTotal: []float64{20, 22, 21}, anchorTotal: []float64{9, 10, 11},
		tendAfterMB: []float64{400, 401, 402}, anchorAfterMB: []float64{400, 400, 400}, noSpace: []float64{25, 30, 40}}
	g.Expect(f.goals()).To(Equal("elections 0: met; write gap below the anchor's and under 1 s: met"))
	var sb strings.Builder
	f.write(&sb)
	g.Expect(sb.String()).To(ContainSubstring("| longest gap between acknowledged writes: Tend | s | 3 | 0.20 | 0.25 | 0.30 | 0.14 |  |"))

	f.tendElections, f.tendGap = []float64{0, 1, 0}, []float64{0.2, 1.3, 0.25}
	g.Expect(f.goals()).To(Equal("elections 0: missed (max 1); write gap below the anchor's and under 1 s: missed (Tend max 1.30 s, median 0.25 s; anchor median 1.80 s)"))
	g.Expect((&b12Figures{}).goals()).To(Equal("elections 0: not measured; write gap below the anchor's and under 1 s: not measured"))
}
