package manager

import (
	"fmt"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/scheme"
)

// Apart is a cache that one controller keeps of its own, for objects the
// manager's cache narrows another way: the etcd member pods, say, beside
// the PodSet pods that the manager's pod cache holds. A label selector
// cannot say "this label or that one", and one informer per kind is what
// the manager's cache has, so a second narrowing needs a second cache.
type Apart struct {
	// ByObject narrows the kinds that the controller reads from it; each
	// kind it lists is held only as narrowed here.
	ByObject map[client.Object]cache.ByObject
	// Cache is set by New, before the controller's Setup runs.
	Cache cache.Cache
}

// apartRunnable starts an Apart cache with the manager's caches, before
// leader election and before any controller: the manager waits for it to
// sync as for its own.
type apartRunnable struct{ cache.Cache }

func (a apartRunnable) GetCache() cache.Cache { return a.Cache }

// addApart builds a's cache over the manager's namespaces, on cfg (the
// cache's lists and watches keep their own token bucket, as the manager's
// cache does), and adds it to mgr.
func addApart(mgr ctrl.Manager, cfg *rest.Config, namespaces []string, name string, a *Apart) error {
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme.Scheme,
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: watched(namespaces),
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject:          a.ByObject,
	})
	if err != nil {
		return fmt.Errorf("the %s controller's own cache: %w", name, err)
	}
	if err := mgr.Add(apartRunnable{c}); err != nil {
		return fmt.Errorf("the %s controller's own cache: %w", name, err)
	}
	a.Cache = c
	return nil
}
