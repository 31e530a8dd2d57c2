package queue

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestJitterSpreadsWithinTenPercent(t *testing.T) {
	g := NewWithT(t)
	const d = 5 * time.Minute
	lowest, highest := d, d
	for range 1000 {
		j := jitter(d)
		g.Expect(j).To(BeNumerically(">=", d-d/10))
		g.Expect(j).To(BeNumerically("<=", d+d/10))
		lowest, highest = min(lowest, j), max(highest, j)
	}
	// Spread, not a constant offset: 1000 draws all within ±5% happen with
	// probability 2^-1000.
	g.Expect(lowest).To(BeNumerically("<", d-d/20))
	g.Expect(highest).To(BeNumerically(">", d+d/20))
}
