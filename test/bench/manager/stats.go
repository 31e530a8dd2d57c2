package manager

import "slices"

// spread is the minimum, median and maximum of some samples.
type spread struct{ min, median, max float64 }

// spreadOf returns the spread of xs; the median of an even count is the
// mean of the middle two. It is the zero spread of no samples.
func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	mid := len(s) / 2
	median := s[mid]
	if len(s)%2 == 0 {
		median = (s[mid-1] + s[mid]) / 2
	}
	return spread{min: s[0], median: median, max: s[len(s)-1]}
}

// order returns which configuration each of 2n samples measures, in the
// pattern before, after, after, before, before, after, ...: each is
// measured as often first as second.
func order(n int) []bool {
	after := make([]bool, 0, 2*n)
	for i := range n {
		after = append(after, i%2 == 1, i%2 == 0)
	}
	return after
}
