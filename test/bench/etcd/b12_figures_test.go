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
		tendAfterMB: []float64{400, 401, 402}, anchorAfterMB: []float64{400, 400, 400}, noSpace: []float64{25, 30, 40},
		migrateSize: 64e6, migrateTotal: []float64{150, 160, 170}, migrateElections: []float64{0, 1, 0}, migrateGap: []float64{1, 2, 3}, migrateLost: []float64{0, 0, 0}}
	g.Expect(f.goals()).To(Equal("elections 0: met; write gap below the anchor's and under 1 s: met; migration with at most 1 election and 0 writes lost: met"))
	var sb strings.Builder
	f.write(&sb)
	g.Expect(sb.String()).To(ContainSubstring("| longest gap between acknowledged writes: Tend | s | 3 | 0.20 | 0.25 | 0.30 | 0.14 |  |"))

	g.Expect(sb.String()).To(ContainSubstring("| … acknowledged writes lost | n | 3 | 0.00 | 0.00 | 0.00 |  |  |"))

	f.tendElections, f.tendGap, f.migrateLost = []float64{0, 1, 0}, []float64{0.2, 1.3, 0.25}, []float64{0, 2, 0}
	g.Expect(f.goals()).To(Equal("elections 0: missed (max 1); write gap below the anchor's and under 1 s: missed (Tend max 1.30 s, median 0.25 s; anchor median 1.80 s); " +
		"migration with at most 1 election and 0 writes lost: missed (elections max 1, lost max 2)"))
	g.Expect((&b12Figures{}).goals()).To(Equal("elections 0: not measured; write gap below the anchor's and under 1 s: not measured; migration: not measured"))
}
