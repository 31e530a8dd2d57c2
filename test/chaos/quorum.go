//go:build e2e

package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/tend-dev/tend/test/e2e/framework"
)

// quorumWatch samples etcd's member list and each member's health twice a
// second, and checks every removal of a member between two samples: after
// it, the healthy voters of the earlier sample that remain must still be a
// quorum of the voters that remain. A removal that breaks that is what the
// operator must never do.
type quorumWatch struct {
	mu         sync.Mutex
	removals   int
	violations []string
	samples    int
	cancel     context.CancelFunc
	done       chan struct{}
}

type memberSample struct {
	name    string
	learner bool
	healthy bool
}

func watchQuorum(e *etcdHandle, tlsConfig *tls.Config) *quorumWatch {
	ctx, cancel := context.WithCancel(context.Background())
	q := &quorumWatch{cancel: cancel, done: make(chan struct{})}
	go q.run(ctx, e, tlsConfig)
	return q
}

func (q *quorumWatch) run(ctx context.Context, e *etcdHandle, tlsConfig *tls.Config) {
	defer close(q.done)
	var prev map[uint64]memberSample
	for ctx.Err() == nil {
		cur, err := sampleMembers(ctx, e, tlsConfig)
		if err == nil {
			q.check(prev, cur)
			prev = cur
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func sampleMembers(ctx context.Context, e *etcdHandle, tlsConfig *tls.Config) (map[uint64]memberSample, error) {
	hosts, _, err := e.hostsNow(ctx)
	if err != nil {
		return nil, err
	}
	cli, err := framework.NewEtcdClient(tlsConfig, hosts, e.serviceEndpoint())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	if err != nil {
		return nil, err
	}
	out := map[uint64]memberSample{}
	for _, m := range resp.Members {
		s := memberSample{name: m.Name, learner: m.IsLearner}
		if _, ok := hosts[e.memberHost(m.Name)]; ok && m.Name != "" {
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, e.memberEndpoint(m.Name))
			scancel()
			s.healthy = err == nil && len(st.Errors) == 0
		}
		out[m.ID] = s
	}
	return out, nil
}

func (q *quorumWatch) check(prev, cur map[uint64]memberSample) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.samples++
	if prev == nil {
		return
	}
	for id, m := range prev {
		if _, ok := cur[id]; ok || m.learner {
			continue
		}
		q.removals++
		voters, healthy := 0, 0
		for id2, m2 := range prev {
			if id2 == id || m2.learner {
				continue
			}
			voters++
			if m2.healthy {
				healthy++
			}
		}
		if healthy < voters/2+1 {
			q.violations = append(q.violations, fmt.Sprintf("voter %s (%x) removed at %s while only %d of the %d remaining voters were healthy: %+v",
				m.name, id, time.Now().UTC().Format(time.RFC3339), healthy, voters, prev))
		}
	}
}

func (q *quorumWatch) stop() (removals int, violations []string, samples int) {
	q.cancel()
	<-q.done
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.removals, q.violations, q.samples
}
