// Package agent is Tend's data path for etcd backups and restores: the
// logic of the steps that `tend backup`, `tend fetch`, `tend verify`,
// `tend restore prepare|install`, `tend artifact delete`, `tend check` and
// `tend recover` run inside Jobs, and of `tend join-check`, every etcd
// member pod's init container. It streams a snapshot from the healthy
// member with the highest revision, compressed and hashed on the way, to
// S3 (a multipart upload with bounded memory, no temporary file) or to a
// file, reads it back and checks its SHA-256; fetches it again for a test
// restore; compares a restored store with the live cluster; installs a
// restored data directory idempotently; deletes what a backup wrote; after
// a roll, checks that every member is healthy on one version with equal
// stores; after a quorum loss, waits for a survivor's etcd run with
// --force-new-cluster to lead alone; and, before a member's etcd starts on
// an empty data directory, refuses it when the peers' member list shows
// that it has run before, and so lost its data. `tend archive`, a
// long-running agent, writes every revision of a cluster after a base
// backup into checksummed segments (the archive: archive.go, its format in
// archive_segment.go), and `tend replay` applies them onto a restored base,
// each revision as one transaction, up to a revision or a time, and can
// compare the result with the live cluster (replay.go). Each step reports a
// Result, which the controllers read from the Pod's termination message
// (ParseResult), and says whether a retry can help (Terminal).
//
// It must not use the Kubernetes API, know a controller, or import the CRD
// types: it takes plain values (URIs, file paths, an owner's UID), reads
// its connection details from mounted files, and its only peers are etcd
// (internal/etcd, and the peer API's member list) and S3 (internal/aws).
// It never overwrites or deletes what another owner wrote, never logs a
// secret, and gives every call to etcd and S3 a deadline.
package agent
