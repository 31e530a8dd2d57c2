package etcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// The calls below keep a cluster's storage: compaction drops history,
// defragmentation gives a member's free pages back to the file system, and
// the NOSPACE alarm is cleared once there is room again. All three change
// the cluster, so they pass the client's Gate.

// Compact drops the key-value history before revision rev on every
// member, and returns once the member asked has applied it to its store
// (physical compaction). The pages it frees count as free in DBSizeInUse
// once a later write has committed, and leave the file only with a
// defragmentation. A rev at or below the cluster's compaction is not an error: the
// history is gone already, and Compact reports it with ErrCompacted, which
// the caller may treat as done. A rev above the current revision is
// etcd's "future revision" (Terminal).
func (c *Client) Compact(ctx context.Context, rev int64) error {
	return c.do(ctx, "compacting at revision "+strconv.FormatInt(rev, 10), func(ctx context.Context) error {
		_, err := c.cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
		return err
	})
}

// Defragmented is what one member's defragmentation did.
type Defragmented struct {
	// Before and After are the member's database file sizes; InUse is how
	// much of it held data before.
	Before, After, InUse int64
	// Took is how long the member took.
	Took time.Duration
}

// Defragment rewrites the database of the member at endpoint without its
// free pages, and reports the sizes before and after. The member serves no
// request while it runs (etcd holds its store), but the others go on: a
// follower's defragmentation costs the cluster no write. A context that
// ends first stops the wait, not the member: it finishes by itself, and
// its next Status shows the new size.
func (c *Client) Defragment(ctx context.Context, endpoint string) (Defragmented, error) {
	var d Defragmented
	err := c.onMember(ctx, "defragmenting "+endpoint, endpoint, func(ctx context.Context, conn *grpc.ClientConn) error {
		m := pb.NewMaintenanceClient(conn)
		before, err := m.Status(ctx, &pb.StatusRequest{}, failFast)
		if err != nil {
			return err
		}
		d.Before, d.InUse = before.DbSize, before.DbSizeInUse
		start := time.Now()
		if _, err := m.Defragment(ctx, &pb.DefragmentRequest{}, failFast); err != nil {
			return err
		}
		d.Took = time.Since(start)
		after, err := m.Status(ctx, &pb.StatusRequest{}, failFast)
		if err != nil {
			return fmt.Errorf("reading the size after: %w", err)
		}
		d.After = after.DbSize
		return nil
	})
	return d, err
}

// DisarmNoSpace clears every member's NOSPACE alarm, and reports how many
// it cleared. Other alarms (CORRUPT) are left: they need a person. A
// database still over its quota raises the alarm again at its next write.
func (c *Client) DisarmNoSpace(ctx context.Context) (int, error) {
	n := 0
	err := c.do(ctx, "disarming the NOSPACE alarm", func(ctx context.Context) error {
		list, err := c.cli.AlarmList(ctx)
		if err != nil {
			return err
		}
		for _, a := range list.Alarms {
			if a.Alarm != pb.AlarmType_NOSPACE {
				continue
			}
			if _, err := c.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// IsNoSpaceAlarm tells whether one of a member's Errors is a NOSPACE
// alarm ("memberID:… alarm:NOSPACE"). Alarms are the cluster's: every
// member lists them all.
func IsNoSpaceAlarm(e string) bool {
	return strings.Contains(e, "alarm:"+pb.AlarmType_NOSPACE.String())
}
