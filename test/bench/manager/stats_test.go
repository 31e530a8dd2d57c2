package manager

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want spread
	}{
		{name: "none", xs: nil, want: spread{}},
		{name: "one", xs: []float64{3}, want: spread{3, 3, 3}},
		{name: "odd", xs: []float64{5, 1, 3}, want: spread{1, 3, 5}},
		{name: "even", xs: []float64{4, 1, 2, 8}, want: spread{1, 3, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(spreadOf(tt.xs)).To(Equal(tt.want))
		})
	}
}

func TestOrderAlternates(t *testing.T) {
	g := NewWithT(t)
	g.Expect(order(3)).To(Equal([]bool{false, true, true, false, false, true}))
	g.Expect(order(0)).To(BeEmpty())
}
