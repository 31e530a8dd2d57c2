// Package etcdcluster runs EtcdClusters: it turns the spec into a CA and
// certificates, a peer and a client Service, a StatefulSet of members with a
// PodDisruptionBudget, and an init Job, then keeps the etcd membership in
// line through internal/etcd, one safe step per pass.
//
// A pass (reconcile.go) runs phases in order: certificates and the root
// Secret (secrets.go, pki.go), Services, budget and StatefulSet (objects.go),
// the membership through etcd (members.go) with the next step chosen by
// planMembers (plan.go), and the init Job (objects.go, job.go); status.go
// computes the status from what the pass saw. The desired objects are built
// by pure functions (names.go, builders.go, job.go, pki.go) with table
// tests; every membership decision is a pure check in internal/etcd or
// plan.go. The package must not wait in a loop for etcd: every pass does at
// most one membership step and requeues.
//
// The cluster's side of backups lives here too: the connection ConfigMap
// that backup pods read (connection.go), the restore of a new cluster from
// a backup before its StatefulSet exists (restore.go), and deletion as
// spec.deletionPolicy says, with a final EtcdBackup (delete.go). It creates
// EtcdBackups but never runs them: internal/controller/etcdbackup does.
//
// Tend deletes, restarts or takes as its own only what it made for this
// very cluster (owned.go): Jobs, the StatefulSet and member pods by their
// controller reference, member claims by the cluster-UID label. A pass
// that fails says so in Degraded (ReconcileFailed, or ObjectNotOurs when
// an object it did not make holds a name it needs).
//
// Rolls (roll.go, roll_plan.go) restart members whose pods run another
// revision than the spec's, one per pass, behind the pure gate of
// planRoll and etcd.CanRestart; a minor upgrade is path-checked
// (checkUpgradePath) and waits for a verified EtcdBackup; a check Job ends
// it. The roll's state is status.update and the pods' revision annotation.
package etcdcluster
