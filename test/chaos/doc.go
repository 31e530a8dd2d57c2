//go:build e2e

// Package chaos is Tend's chaos suite, on the local cluster (see
// test/e2e/framework and docs/cluster.md): it kills the manager with SIGKILL
// at random points of PodSet and EtcdCluster operations, kills etcd members
// under a writer, kills the leader of two manager replicas, and sends
// generated invalid and random specs of every kind to the apiserver. Every
// scenario checks its invariants from what it observes (watches, etcd's own
// answers, the manager pods' status), counts them, and fails with the
// evidence when one is broken. The counts are printed as one table at the
// end of the run (docs/reliability.md).
//
// Run it with make chaos (the full counts) or make test-chaos-short (CI's
// reduced form). The PodSet, leader and fuzz scenarios run one after
// another: they count the manager's restarts and writes, or change its
// Deployment, and a kill elsewhere would disturb those counts. The etcd
// scenarios then run three at a time (t.Parallel, go test's -parallel of 3
// on two cores: they mostly wait): each checks its own cluster, in its own namespace, and a
// kill that another scenario makes is one more fault whose invariants must
// hold; their kills take turns (killManager), and each draws from a random
// source of its own (random). The package must not skip: a missing
// component fails the run.
//
// It must not change the cluster beyond its own namespaces, except for the
// manager's pods (which it kills) and the manager Deployment's replicas
// (which the leader-election scenario raises to 2 and restores).
package chaos
