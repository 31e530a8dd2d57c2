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
// The Jobs' pods are held in a pod cache of the controller's own
// (manager.Apart, pods.go: the manager's pod cache holds the PodSets'),
// narrowed to the pods labelled etcd.tend.dev/backup and trimmed to their
// metadata and container states. They are watched: a step that ends in a
// pod, which changes nothing on the Job until the pod ends, starts a pass
// at once, as does any change of the Jobs, so nothing is polled while a
// Job runs. A pod maps to the backup its label names only when a Job of
// that backup's name controls it; a pass reads only the pods of the Job
// that the backup owns, by UID. Where the pod cache may lag, the apiserver is
// read once: when a Job has recorded pods ending that the cache does not
// show, and before a deleted backup's file is deleted, to be sure that no
// pod of its Job still runs. A pass asks to look again only at what no
// watch reports: the cluster's connection ConfigMap, a Job of the
// backup's name that is not Tend's, a restore that holds a deleted backup,
// and a pod that lost its Job.
//
// The package must not talk to etcd or to a store: only the agents in the
// Jobs do. It keeps no state in memory: every decision is made again from
// the objects (status, annotations, Jobs, pods), so a manager killed at any
// point resumes where it was.
package etcdbackup
