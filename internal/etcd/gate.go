package etcd

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// reads are etcd's RPCs that change nothing (and Alarm's GET, see
// isRead): with a Config.Gate, they are the only ones sent without passing
// it. Every other RPC, those that this package makes (MemberAdd,
// MemberPromote, MemberRemove, MoveLeader, the user and auth changes) and
// any that it will (Compact, Defragment, an alarm's deactivation, a Put),
// passes the Gate first: a new call cannot forget it.
var reads = map[string]bool{
	pb.KV_Range_FullMethodName:              true,
	pb.KV_RangeStream_FullMethodName:        true,
	pb.Watch_Watch_FullMethodName:           true,
	pb.Lease_LeaseTimeToLive_FullMethodName: true,
	pb.Lease_LeaseLeases_FullMethodName:     true,
	pb.Cluster_MemberList_FullMethodName:    true,
	pb.Maintenance_Status_FullMethodName:    true,
	pb.Maintenance_Hash_FullMethodName:      true,
	pb.Maintenance_HashKV_FullMethodName:    true,
	pb.Maintenance_Snapshot_FullMethodName:  true,
	pb.Auth_AuthStatus_FullMethodName:       true,
	pb.Auth_Authenticate_FullMethodName:     true, // a token for the calls that follow
	pb.Auth_UserGet_FullMethodName:          true,
	pb.Auth_UserList_FullMethodName:         true,
	pb.Auth_RoleGet_FullMethodName:          true,
	pb.Auth_RoleList_FullMethodName:         true,
	"/grpc.health.v1.Health/Check":          true,
	"/grpc.health.v1.Health/Watch":          true,
}

// isRead tells whether the RPC method, with request req, changes nothing.
// An Alarm request reads only when it asks for the alarms (GET): its
// ACTIVATE and DEACTIVATE change them.
func isRead(method string, req any) bool {
	if method == pb.Maintenance_Alarm_FullMethodName {
		a, ok := req.(*pb.AlarmRequest)
		return ok && a.Action == pb.AlarmRequest_GET
	}
	return reads[method]
}

// gateUnary makes every unary RPC but the reads pass the client's Gate
// first. It runs inside the etcd client's retries, once per attempt, and
// outside the recording of attempts: a refused attempt sends nothing, and
// its error, which carries no gRPC code, is not retried.
func (c *Client) gateUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !isRead(method, req) {
		if err := c.gate.Allow(ctx); err != nil {
			return err
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// gateStream makes every stream but the reads (Watch, Snapshot,
// RangeStream) pass the client's Gate before it opens: LeaseKeepAlive
// does.
func (c *Client) gateStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !reads[method] {
		if err := c.gate.Allow(ctx); err != nil {
			return nil, err
		}
	}
	return streamer(ctx, desc, cc, method, opts...)
}
