// Package etcdserver runs real etcd clusters for tests: 1 to N members on
// 127.0.0.1, each a process of the etcd binary that hack/toolchain.sh builds
// from the pinned modules, with its data in a temporary directory. A cluster
// speaks plaintext, or TLS with client-certificate authentication on both the
// client and the peer ports, from a CA that the harness generates. Tests can
// add members (to join as learners), kill and restart them, and read their
// logs; every process is killed when the test ends, and also when the test
// binary dies.
//
// It is for tests only, and it never skips: when the binaries cannot be found
// or built, or etcd does not start, the test fails and says why. It binds
// only to 127.0.0.1, runs etcd with fsync off, and knows nothing of Tend's
// packages: it talks to etcd over HTTP (/readyz, /livez), not through the
// client that it exists to test.
package etcdserver
