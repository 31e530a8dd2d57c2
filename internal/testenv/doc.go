// Package testenv runs the tests of one package against a real kube-apiserver
// and etcd (controller-runtime's envtest), built by hack/toolchain.sh from
// pinned modules. It installs Tend's CRDs from config/crd/bases, with the
// conversion webhooks of multi-version CRDs pointed at the test process (see
// Env.WebhookOptions), and gives each test a namespace of its own.
//
// It is for tests only. It never skips: when a binary cannot be found or
// built, the package's tests fail and say why.
package testenv
