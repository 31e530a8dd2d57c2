// Package fence is the check that every write of the controllers passes
// first, to Kubernetes or outside it (SQS, etcd): a Gate. With leader
// election on, the manager's Gate (internal/manager, fence.go) lets a write
// through only while this process holds the leader-election Lease; a
// process found to have lost it writes nothing more, anywhere, and stops.
// Without leader election there is nothing to fence with, and Open lets
// everything through.
//
// It is a leaf: the manager implements Gate, the clients of the upstream
// APIs (internal/aws, internal/etcd) take one, and none of them imports
// another for it. It must not hold state, read a Lease or know a client:
// it only names the check and its error.
package fence
