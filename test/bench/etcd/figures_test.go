package etcd

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestStats(t *testing.T) {
	g := NewWithT(t)
	create := func(s sample) time.Duration { return s.create }
	g.Expect(statsOf(nil, create).String()).To(Equal("–"))
	one := []sample{{create: 12340 * time.Millisecond}}
	g.Expect(statsOf(one, create).String()).To(Equal("12.3"))
	three := []sample{{create: 10 * time.Second}, {create: 14 * time.Second}, {create: 12 * time.Second}}
	g.Expect(statsOf(three, create)).To(Equal(stats{n: 3, mean: 12, min: 10, max: 14}))
	g.Expect(statsOf(three, create).String()).To(Equal("12.0 (10.0–14.0)"))
}

func TestWriteTable(t *testing.T) {
	g := NewWithT(t)
	s := func(create, scale time.Duration) sample {
		return sample{create: create, createAll: create, scale: scale, replace: 20 * time.Second,
			replaceNotice: 2 * time.Second, replaceThreshold: 10 * time.Second, replaceRest: 8 * time.Second, floor: time.Second}
	}
	tend := &variant{name: "tend", samples: []sample{s(15*time.Second, 10*time.Second)}}
	anchor := &variant{name: "anchor", interval: "10s", samples: []sample{s(15*time.Second, 40*time.Second)}}
	var b strings.Builder
	writeTable(&b, figures(3, 5), tend, anchor)
	out := b.String()
	g.Expect(out).To(ContainSubstring("| figure, s | tend (default) | anchor (--etcdcluster-member-change-interval=10s) | tend/anchor | tend/floor | anchor/floor |"))
	g.Expect(out).To(ContainSubstring("| scale 3 → 5 → 5 healthy voters, no learner | 10.0 | 40.0 | 0.25 | 10.00 | 40.00 |"))
	g.Expect(out).To(ContainSubstring("| … of which until Tend acted (the old pod gone, a new claim seen; a member that lost its data waits for no unhealthyFor) | 10.0 | 10.0 | 1.00 | 10.00 | 10.00 |"))
	g.Expect(out).To(ContainSubstring("floor: etcd's default election timeout (heartbeat 100ms), 1s."))

	// A variant that failed or was not run leaves its cells empty.
	anchor.samples = nil
	b.Reset()
	writeTable(&b, figures(3, 5), tend, anchor)
	g.Expect(b.String()).To(ContainSubstring("| create 3 members → Available | 15.0 | – | – | 15.00 | – |"))
}
