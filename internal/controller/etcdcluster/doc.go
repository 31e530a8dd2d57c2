// Package etcdcluster runs EtcdClusters, and carries out EtcdRestores.
//
// One pass (reconcile.go):
//
//	ensure   certificates and the root Secret (secrets.go), Services, budget
//	         and StatefulSet (objects.go; a new cluster's data is restored
//	         before its StatefulSet, restore.go), the connection ConfigMap
//	observe  world.go: the StatefulSet, the member pods and volumes, the
//	         restores and the recovery, the members through etcd, the init
//	         Job, the upgrade and the roll; once, before anything is chosen
//	choose   choose.go: next(world) is one operation, the first row of the
//	         precedence table that applies
//	act      the operation's own file; serve.go keeps the StatefulSet,
//	         authentication, volumes and the init Job in line around the
//	         operations of serving members
//	status   status.go computes the status from what the pass saw, and the
//	         pass writes it once
//
// The precedence table (choose.go), first row first; one operation a pass:
//
//	operation      chosen when                                    file
//	Delete         the cluster is being deleted                   op_delete.go
//	Wait           no StatefulSet to act on yet                   (objects.go made it, or waits)
//	Recovery       a restore or quorum-loss recovery is under way op_recovery.go, recover_survivor.go
//	StartRestore   a pending EtcdRestore may start                op_restore.go
//	FailedHold     the last recovery failed                       op_recovery.go
//	Wait           no member answered; spec.paused
//	QuorumLoss     the quorum is lost and the guard allows        op_quorum_loss.go
//	Membership     replace, add a learner, promote, move, remove  op_membership.go
//	NoSpace        etcd raised NOSPACE (Auto): compact, defrag,   op_no_space.go
//	               disarm; one that waits for a person is only
//	               reported, so the roll that raises the quota goes on
//	Compact        history older than the retention may go (no    op_compact.go
//	               roll due or under way)
//	Defragment     a round runs (it ends before a roll starts),   op_defragment.go
//	               or one is asked, scheduled or due by
//	               fragmentation and no roll is; one member a pass
//	ExpandVolumes  member claims ask for less than storage.size,  op_expand_volumes.go
//	               and their class can grow (online, no restart)
//	MigrateVolumes claims of another class, or smaller and of a   op_migrate_volumes.go
//	               class that cannot grow: backup, remake the
//	               StatefulSet, move one member (no roll under
//	               way); or release a kept volume
//	UpgradeBackup  a minor upgrade waits for its backup           op_upgrade_backup.go
//	Roll           a member's pod runs another revision           op_roll.go
//	Check          the roll's check Job                           op_check.go
//	None           the members match the spec
//
// Beside the chosen operation, a pass of a cluster with spec.archive runs
// its continuous archive (archive.go): the base backup, the agent's
// Deployment, the window read from the agent; it holds still while a
// restore or recovery changes the history, and Tend's compaction keeps
// what it has not stored (archiveFloor).
//
// A pending EtcdRestore that cannot start is told why (it waits, or it is
// refused) and the choice goes on down the table; the quorum-loss guard's
// plan is reported whatever is chosen. Every operation picks up from what
// is stored on objects (status.recovery, status.update, the pods' revision
// annotation, Jobs with fixed names), so a pass cut short anywhere is
// resumed by the next. A pass never waits in a loop for etcd: it does one
// step of one operation and requeues.
//
// The files are in layers, and none refers to a higher one:
//
//  0. names and pure builders: names.go, version.go, builders.go, job.go,
//     pki.go, metrics.go, readiness.go
//  1. pure decisions and the status: plan.go (membership), roll_plan.go,
//     recovery_plan.go (the quorum-loss guard), maintenance_plan.go
//     (compaction, defragmentation, NOSPACE), volume_plan.go, migration_plan.go, backups.go, status.go,
//     maintenance_status.go, archive_plan.go
//  2. the reconciler's reads and objects: reconciler.go (Reconciler,
//     scope), owned.go, jobs.go, connect.go, volumes.go, members.go,
//     startup.go, upgrade.go, roll_adopt.go, secrets.go, objects.go,
//     connection.go, restore.go, restore_source.go, restore_volumes.go
//  3. observe and choose: world.go, maintenance.go, choose.go
//  4. the operations: op_*.go, serve.go, update.go, recover_survivor.go,
//     and the archive beside them: archive.go
//  5. the pass and its wiring: reconcile.go, controller.go
//
// Tend deletes, restarts or takes as its own only what it made for this
// very cluster (owned.go): Jobs, the StatefulSet and member pods by their
// controller reference, member claims by the cluster-UID label. A pass
// that fails says so in Degraded (ReconcileFailed, or ObjectNotOurs when
// an object it did not make holds a name it needs). The EtcdBackups it
// makes (final, pre-upgrade, quorum loss) are run by
// internal/controller/etcdbackup, which shares only names with this
// package (internal/etcdnames).
package etcdcluster
