// Package etcdcluster runs EtcdClusters: it turns the spec into a CA and
// certificates, a peer and a client Service, a StatefulSet of members with a
// PodDisruptionBudget, and an init Job, then keeps the etcd membership in
// line through internal/etcd, one safe step per pass.
//
// The desired objects are built by pure functions (names.go, builders.go,
// pki.go) with table tests; decisions about membership are pure checks in
// internal/etcd. The package must not wait in a loop for etcd: every pass
// does one step and requeues.
package etcdcluster
