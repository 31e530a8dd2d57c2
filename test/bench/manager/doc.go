// Package manager measures the heap that the manager's cache holds in a
// cluster full of objects that are not Tend's (issue 14, item 2): with the
// cache as it was (every Secret and ConfigMap in the cluster, pods and
// volume claims narrowed) and as it is (Secrets and ConfigMaps only if
// labelled app.kubernetes.io/managed-by=tend, plus the metadata of every
// Secret, for the watches of the Secrets that users name).
//
// BenchmarkCache starts a real kube-apiserver and etcd (internal/testenv),
// writes flagSecrets unrelated Secrets and flagConfigMaps unrelated
// ConfigMaps of flagSize bytes each over flagNamespaces namespaces, and the
// Secrets and ConfigMaps of a few EtcdClusters and Queues, labelled as
// Tend labels them. Then, flagSamples times for each, in the order
// before, after, after, before, ... so that neither always runs on a
// fresher heap, it builds the cache, asks it for the informers that the
// controllers' watches ask for, waits until they are synced, and reads the
// heap in use after a full GC, less the same figure read just before the
// cache was built. Both caches are built by the constructor that `tend
// manager` uses (internal/manager.CacheFor): "after" from the real
// controllers' declarations, "before" from the declarations as they were,
// which only this benchmark keeps (before()).
//
// It prints a Markdown table, min / median / max of each, with the ratio
// of the medians, and reports the medians through b.ReportMetric. It never
// fails on time or memory; it fails on real errors (an apiserver that does
// not start, an object that cannot be written) and when the new cache
// holds a Secret that is not Tend's. Run it with
//
//	KUBEBUILDER_ASSETS=$(hack/toolchain.sh --envtest) \
//	  go test -run '^$' -bench . -benchtime 1x ./test/bench/manager/
//
// and change its size after -args: -cache.secrets, -cache.configmaps,
// -cache.size, -cache.namespaces, -cache.samples.
package manager
