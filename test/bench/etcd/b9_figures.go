package etcd

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// B9's figures: each is a set of samples, printed as least, median and
// greatest, and, where an anchor ran beside it, as the ratio of its median
// to the anchor's.

// dist is the least, the median and the greatest of n samples.
type dist struct {
	n             int
	min, med, max float64
}

// distOf returns the distribution of xs; the median of an even number of
// samples is the mean of the middle two.
func distOf(xs []float64) dist {
	if len(xs) == 0 {
		return dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	d := dist{n: len(s), min: s[0], max: s[len(s)-1]}
	if mid := len(s) / 2; len(s)%2 == 1 {
		d.med = s[mid]
	} else {
		d.med = (s[mid-1] + s[mid]) / 2
	}
	return d
}

// b9Row is one line of a B9 table.
type b9Row struct {
	label string
	// unit of the samples: "MB/s" (10^6 bytes a second) or "s".
	unit    string
	samples []float64
	// vs, when not nil, are the anchor's samples: the row shows its
	// median over the anchor's.
	vs []float64
	// goal, when above zero, is the least that ratio should be.
	goal float64
	// metric, when set, is the b.ReportMetric unit of the median.
	metric string
}

// ratio is the row's median over its anchor's, and whether there is one.
func (r b9Row) ratio() (float64, bool) {
	if r.vs == nil {
		return 0, false
	}
	d, a := distOf(r.samples), distOf(r.vs)
	if d.n == 0 || a.n == 0 || a.med == 0 {
		return 0, false
	}
	return d.med / a.med, true
}

// writeB9Table writes rows as a Markdown table under a title line.
func writeB9Table(w io.Writer, title string, rows []b9Row) {
	fmt.Fprintf(w, "\n%s\n\n", title)
	fmt.Fprintln(w, "| figure | unit | n | min | median | max | median ÷ anchor's | goal |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		d := distOf(r.samples)
		cells := []string{r.label, r.unit, fmt.Sprint(d.n), "–", "–", "–", "", ""}
		if d.n > 0 {
			cells[3], cells[4], cells[5] = num(d.min), num(d.med), num(d.max)
		}
		ratio, ok := r.ratio()
		if ok {
			cells[6] = fmt.Sprintf("%.2f", ratio)
		} else if r.vs != nil {
			cells[6] = "–"
		}
		if r.goal > 0 {
			switch {
			case !ok:
				cells[7] = fmt.Sprintf("≥ %.2f: not measured", r.goal)
			case ratio >= r.goal:
				cells[7] = fmt.Sprintf("≥ %.2f: met", r.goal)
			default:
				cells[7] = fmt.Sprintf("≥ %.2f: missed", r.goal)
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// num formats a figure with three significant digits or more.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// mbPerSecond is a rate in MB/s (10^6 bytes a second, as etcdctl counts).
func mbPerSecond(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / seconds
}

// rotation is the order of the variants in round i: each round starts one
// further along, so that no variant always runs first (on a cold cache) or
// always right after the same other one.
func rotation[T any](variants []T, round int) []T {
	n := len(variants)
	out := make([]T, 0, n)
	for j := range n {
		out = append(out, variants[(round+j)%n])
	}
	return out
}
