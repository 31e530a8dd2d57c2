// Package statemetrics exports the state of Tend's objects as Prometheus
// gauges on the manager's /metrics, beside controller-runtime's workqueue
// and reconcile metrics: what a dashboard or an alert needs that the
// operands' own metrics do not say (members by state, the quorum margin,
// the last backups, replicas by state, whether a queue is synced), and
// every object's conditions.
//
// The gauges are read from the manager's cache at each scrape, from the
// objects' status, as kube-state-metrics does: they are never ahead of or
// behind what `kubectl get` shows, and nothing is kept between scrapes, so
// a deleted object's series go with it. Each controller package provides
// the Source for its kinds; only the leader exports (a standby's cache is
// as good, but two exporters would double every series).
//
// It must not write to the API, read anything but the cache, or export a
// Secret's content or any label value a user did not choose (names,
// namespaces, condition types and reasons).
package statemetrics
