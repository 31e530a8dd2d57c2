//go:build e2e

// Package framework runs Tend's end-to-end tests on the local cluster
// (hack/cluster, docs/cluster.md): a real kube-apiserver, kubelet, containerd
// and CoreDNS on this machine, where pods really run, from images built
// offline, with the operator deployed in-cluster from its image.
//
// A test package starts the cluster once, in TestMain:
//
//	var cluster = framework.New()
//
//	func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }
//
// and each test works in a namespace of its own:
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		ns := cluster.Namespace(t)
//		... cluster.Client.Create(ctx, obj) ...
//		cluster.WaitForJobComplete(t, ns, "writer")
//	}
//
// When a test fails, its namespace's objects, events and pod logs, the
// operator's logs and the cluster components' logs are saved under the
// artifacts directory ($ARTIFACTS, or .cache/e2e-artifacts/ in the
// repository), and the test's log says where.
//
// The framework brings the cluster up when it is not running, but never stops
// it: the next run, or a developer, reuses it. It must not skip: a missing
// component fails the run and says what is missing.
package framework
