package etcd

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestCheckFiguresSubtractIdleAndScaleToAMinute(t *testing.T) {
	g := NewWithT(t)
	s := checkSample{Ops: 100, Members: 3, Elapsed: 5 * time.Second, MemberCPU: 2 * time.Second, IdleCPU: 0.1,
		CallerCPU: 600 * time.Millisecond, Bytes: 300_000, RPCs: map[string]float64{"Status": 300, "Range": 300, "MemberList": 100}}
	g.Expect(s.memberCPUPerOp()).To(BeNumerically("~", 5.0, 1e-9), "(2 s - 0.1 s/s × 5 s) / 300 member-operations")
	g.Expect(s.callerCPUPerOp()).To(BeNumerically("~", 2.0, 1e-9))
	g.Expect(s.bytesPerOp()).To(BeNumerically("~", 1000.0, 1e-9))
	g.Expect(s.rpcsPerOp()).To(BeNumerically("~", 7.0/3, 1e-9))

	scrape := checkSample{Ops: 100, Members: 3, Elapsed: 5 * time.Second, MemberCPU: 3500 * time.Millisecond, IdleCPU: 0.1, Bytes: 600_000}
	f := &checkFigures{Members: 3, Variants: []*checkVariant{
		{Name: "pass", PerMinute: 2, Samples: []checkSample{s, s, s}},
		{Name: "scrape (every 1m)", PerMinute: 1, Samples: []checkSample{scrape, scrape, scrape}},
	}}
	g.Expect(f.Variants[0].perMinute(checkSample.memberCPUPerOp)).To(ConsistOf(10.0, 10.0, 10.0))
	var sb strings.Builder
	f.write(&sb)
	g.Expect(sb.String()).To(ContainSubstring("pass against scrape (every 1m), per member-minute (medians): member CPU 1.00×, bytes 1.00×."))
	g.Expect(sb.String()).To(ContainSubstring("| … MemberList | 0.333 / 0.333 / 0.333 | 0 / 0 / 0 |"))
}
