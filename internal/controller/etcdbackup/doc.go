// Package etcdbackup runs EtcdBackups and EtcdBackupSchedules.
//
// An EtcdBackup is one Job, <backup>-backup, built by a pure function
// (job.go) as internal/podspec and the agents' contract lay it out: `tend
// backup`, and by default a test restore (`tend fetch`, etcdutl, a
// throwaway etcd, `tend verify`). A pass (backup.go) waits for the cluster
// to be Available and for its turn (one backup Job of a cluster at a
// time), creates the Job, and reads each step's Result from the
// termination messages of the Job's pods (steps.go, the one parser); the
// status is computed once per pass from what it saw (backup_status.go).
// With artifactPolicy Delete a finalizer guards the file: deletion stops a
// running Job, runs <backup>-delete (`tend artifact delete`), and lets go
// (backup_delete.go).
//
// An EtcdBackupSchedule (schedule.go) makes EtcdBackups named
// <schedule>-<unix time of the run> on a cron line in its time zone
// (cron.go): the latest due run once, never a replay of missed ones, and
// never while one of its backups is active. It deletes what retention
// drops (retention.go) and judges the backups' health
// (schedule_status.go). Its backups are owned by it: deleting a schedule
// deletes its backups, and with artifactPolicy Delete their files too,
// unless the deletion orphans them (kubectl delete --cascade=orphan).
//
// The package must not talk to etcd or to a store: only the agents in the
// Jobs do. It keeps no state in memory: every decision is made again from
// the objects (status, annotations, Jobs, pods), so a manager killed at any
// point resumes where it was. Pods are read live through the API reader,
// since the manager caches no pods but PodSets'.
package etcdbackup
