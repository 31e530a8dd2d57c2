// Package podspec holds what every pod that Tend makes for an etcd cluster
// shares: the restricted security contexts, where the agents find their
// inputs (the cluster's connection ConfigMap, its client certificate, a
// scratch volume, a backup volume), and how a backup location (S3 or a
// PersistentVolumeClaim) turns into the agent's arguments, environment and
// mounts.
//
// It builds values only: it reads and writes nothing, and knows no
// controller. The agents' own flags are defined in cmd/tend; the names
// here must stay in step with them.
package podspec
