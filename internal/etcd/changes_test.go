package etcd

import (
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestGroupByRevision(t *testing.T) {
	g := NewWithT(t)
	put := func(key string, rev, lease int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte("v-" + key), ModRevision: rev, Lease: lease}}
	}
	del := func(key string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
	}
	got := group([]*clientv3.Event{put("a", 7, 0), put("b", 7, 0), del("c", 7), put("d", 8, 0x42), del("a", 9), del("b", 9)})
	g.Expect(got).To(Equal([]Revision{
		{Revision: 7, Changes: []Change{{Key: []byte("a"), Value: []byte("v-a")}, {Key: []byte("b"), Value: []byte("v-b")}, {Key: []byte("c"), Delete: true}}},
		{Revision: 8, Changes: []Change{{Key: []byte("d"), Value: []byte("v-d"), Lease: 0x42}}},
		{Revision: 9, Changes: []Change{{Key: []byte("a"), Delete: true}, {Key: []byte("b"), Delete: true}}},
	}))
	g.Expect(group(nil)).To(BeEmpty())
}
