package etcd

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// checkVariant is one way of touching every member, measured in F1's check
// benchmark: Tend's idle pass, its connection alone, or a scrape.
type checkVariant struct {
	Name string
	// PerMinute is how often it runs against a member at idle.
	PerMinute float64
	Samples   []checkSample
}

// checkSample is one sample of a variant: Ops operations, each touching
// every one of Members members.
type checkSample struct {
	Ops, Members int
	Elapsed      time.Duration
	// MemberCPU is the members' CPU time over the operations, all members
	// together, and IdleCPU what they spend per second with nothing asked.
	MemberCPU time.Duration
	IdleCPU   float64
	// CallerCPU is the calling process's own CPU time over the operations.
	CallerCPU time.Duration
	// Bytes went over the wire, both ways, through the caller's connections.
	Bytes int64
	// RPCs are the gRPC requests that the members started, by method.
	RPCs map[string]float64
}

// memberCPUPerOp is the CPU time one operation costs one member, in
// milliseconds, less what the members spend idle over as long.
func (s checkSample) memberCPUPerOp() float64 {
	busy := s.MemberCPU.Seconds() - s.IdleCPU*s.Elapsed.Seconds()
	return 1000 * busy / float64(s.Ops*s.Members)
}

func (s checkSample) callerCPUPerOp() float64 {
	return 1000 * s.CallerCPU.Seconds() / float64(s.Ops*s.Members)
}

func (s checkSample) bytesPerOp() float64 {
	return float64(s.Bytes) / float64(s.Ops*s.Members)
}

func (s checkSample) rpcsPerOp() float64 {
	var n float64
	for _, v := range s.RPCs {
		n += v
	}
	return n / float64(s.Ops*s.Members)
}

func (v *checkVariant) each(of func(checkSample) float64) []float64 {
	out := make([]float64, len(v.Samples))
	for i, s := range v.Samples {
		out[i] = of(s)
	}
	return out
}

func (v *checkVariant) perMinute(of func(checkSample) float64) []float64 {
	xs := v.each(of)
	for i := range xs {
		xs[i] *= v.PerMinute
	}
	return xs
}

// checkFigures is the table of F1's check benchmark: Tend's check against a
// scrape, per operation and per member-minute.
type checkFigures struct {
	Members  int
	Variants []*checkVariant // Tend's pass first, the scrapes last
}

// methods lists the gRPC methods that any variant called.
func (f *checkFigures) methods() []string {
	var out []string
	for _, v := range f.Variants {
		for _, s := range v.Samples {
			for m := range s.RPCs {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func (f *checkFigures) write(w io.Writer) {
	var names []string
	for _, v := range f.Variants {
		names = append(names, v.Name)
	}
	fmt.Fprintf(w, "F1 checks: what touching each member of an idle %d-member cluster costs the members, in %d samples.\n\n", f.Members, len(f.Variants[0].Samples))
	fmt.Fprintf(w, "| figure | %s |\n|---|%s\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	row := func(label string, of func(*checkVariant) string) {
		cells := make([]string, len(f.Variants))
		for i, v := range f.Variants {
			cells[i] = of(v)
		}
		fmt.Fprintf(w, "| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	row("operations per sample", func(v *checkVariant) string {
		return spread(v.each(func(s checkSample) float64 { return float64(s.Ops) }))
	})
	row("member CPU per operation per member, ms (less idle)", func(v *checkVariant) string { return spread(v.each(checkSample.memberCPUPerOp)) })
	row("caller CPU per operation per member, ms", func(v *checkVariant) string { return spread(v.each(checkSample.callerCPUPerOp)) })
	row("bytes on the wire per operation per member", func(v *checkVariant) string { return spread(v.each(checkSample.bytesPerOp)) })
	row("gRPC requests per operation per member", func(v *checkVariant) string { return spread(v.each(checkSample.rpcsPerOp)) })
	for _, m := range f.methods() {
		row("… "+m, func(v *checkVariant) string {
			return spread(v.each(func(s checkSample) float64 { return s.RPCs[m] / float64(s.Ops*s.Members) }))
		})
	}
	row("**at idle**: operations per member per minute", func(v *checkVariant) string { return f1Num(v.PerMinute) })
	row("member CPU per member per minute, ms", func(v *checkVariant) string { return spread(v.perMinute(checkSample.memberCPUPerOp)) })
	row("bytes on the wire per member per minute", func(v *checkVariant) string { return spread(v.perMinute(checkSample.bytesPerOp)) })
	row("gRPC requests per member per minute", func(v *checkVariant) string { return spread(v.perMinute(checkSample.rpcsPerOp)) })
	tend := f.Variants[0]
	fmt.Fprintln(w)
	for _, v := range f.Variants[1:] {
		if !strings.HasPrefix(v.Name, "scrape") {
			continue
		}
		fmt.Fprintf(w, "%s against %s, per member-minute (medians): member CPU %.2f×, bytes %.2f×.\n", tend.Name, v.Name,
			medianOf(tend.perMinute(checkSample.memberCPUPerOp))/medianOf(v.perMinute(checkSample.memberCPUPerOp)),
			medianOf(tend.perMinute(checkSample.bytesPerOp))/medianOf(v.perMinute(checkSample.bytesPerOp)))
	}
	fmt.Fprintln(w, "Per operation: least / median / greatest over the samples. The members' CPU is theirs over the operations less their idle rate, measured just before.")
}

func (f *checkFigures) metrics() map[string]float64 {
	out := map[string]float64{}
	for _, v := range f.Variants {
		key := strings.NewReplacer(" ", "-", "(", "", ")", "", ",", "").Replace(v.Name)
		out[key+"-member-ms/min"] = medianOf(v.perMinute(checkSample.memberCPUPerOp))
		out[key+"-bytes/min"] = medianOf(v.perMinute(checkSample.bytesPerOp))
	}
	return out
}
