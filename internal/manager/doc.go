// Package manager assembles Tend's controller manager: it turns command-line
// options into a controller-runtime Manager with leader election, metrics,
// health probes, the webhook server (internal/webhook; none with
// --webhook-disabled), and the controllers that --controllers selects.
//
// It knows nothing about any one controller. Each controller package exposes a
// Controller value, and cmd/tend hands the list to Run. Nothing here reconciles
// or talks to an upstream API.
//
// The manager's cache holds what the controllers' declarations narrow it to
// (Controller.Cache): of Secrets and ConfigMaps, only Tend's (MadeByTend), so
// that its memory grows with Tend's objects, not the cluster's; and, for the
// kinds that a controller lists in Controller.Metadata, the metadata of every
// object, so that a change to an object that a user names (a Queue's
// connection Secret) still starts a pass. Objects that the cache does not hold
// are read live (ReadThrough, or the manager's APIReader). A narrowing limits
// the cache, not the RBAC: the informers still list and watch the whole kind.
//
// With leader election on, the controllers' writes pass a fence (fence.go):
// before the writes of each second, it reads the Lease live, and refuses
// them unless this process holds it unexpired; a process found to have lost
// it stops. controller-runtime's leader election alone lets a leader that
// was frozen past its Lease act on its stale cache when it thaws. The
// fence guards their client's writes, and, as the fence.Gate that GateOf
// returns, their writes to SQS and etcd: a controller hands it to the
// clients that it builds (internal/aws's Connection.Gate, internal/etcd's
// Config.Gate).
package manager
