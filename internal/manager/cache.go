package manager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/tend-dev/tend/internal/scheme"
)

// The label, and its value, that every Secret and ConfigMap that Tend
// makes carries (the etcdcluster controller's labels(), the queue
// controller's publish): of these kinds, which users fill clusters with,
// the manager's cache holds only the objects so labelled.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "tend"
)

// WithLabel restricts a cache to the objects that carry the label key, with
// any value: a controller's way to keep, say, only its own pods in memory.
// key must be a valid label key; it is a constant in every caller.
func WithLabel(key string) cache.ByObject {
	has, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("cache restriction on label %q: %v", key, err))
	}
	return cache.ByObject{Label: labels.NewSelector().Add(*has)}
}

// TrimPod returns a cache transform that keeps of a pod its metadata, less
// managedFields, and what keep copies from the pod (in) to the kept one
// (out): a controller's pods, trimmed to what it reads. Every write of a
// pod so cached must be a merge patch computed from the cached copy, so
// that a field left out is never written back.
func TrimPod(keep func(in, out *corev1.Pod)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
		out.ManagedFields = nil
		keep(p, out)
		return out, nil
	}
}

// MadeByTend restricts a cache to the objects labelled
// app.kubernetes.io/managed-by=tend. A label that is only present would
// not do: Helm, Argo CD and others set the same key on their objects.
func MadeByTend() cache.ByObject {
	is, err := labels.NewRequirement(LabelManagedBy, selection.Equals, []string{ManagedBy})
	if err != nil {
		panic(fmt.Sprintf("cache restriction on label %s=%s: %v", LabelManagedBy, ManagedBy, err))
	}
	return cache.ByObject{Label: labels.NewSelector().Add(*is)}
}

// CacheFor returns the options and the constructor with which New builds
// the manager's cache for controllers. Every cached object loses its
// managedFields, which no controller reads and which are often a third of
// an object's size.
//
// Controllers may narrow the same kind only the same way. The metadata of
// the kinds that a controller lists in Metadata is cached apart, for every
// object of the kind, whatever Cache narrows their full objects to.
func CacheFor(controllers []Controller) (cache.Options, cache.NewCacheFunc, error) {
	opts := cache.Options{Scheme: scheme.Scheme, DefaultTransform: cache.TransformStripManagedFields()}
	type narrowing struct {
		by    cache.ByObject
		owner string
	}
	byType := map[reflect.Type]narrowing{}
	var metadata []client.Object
	for _, c := range controllers {
		for obj, by := range c.Cache {
			t := reflect.TypeOf(obj)
			if other, ok := byType[t]; ok {
				if !reflect.DeepEqual(other.by, by) {
					return opts, nil, fmt.Errorf("controllers %s and %s narrow the cache of %T differently", other.owner, c.Name, obj)
				}
				continue
			}
			byType[t] = narrowing{by: by, owner: c.Name}
			if opts.ByObject == nil {
				opts.ByObject = map[client.Object]cache.ByObject{}
			}
			opts.ByObject[obj] = by
		}
		metadata = append(metadata, c.Metadata...)
	}
	if len(metadata) == 0 {
		return opts, cache.New, nil
	}
	return opts, func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		return newSplitCache(cfg, opts, metadata)
	}, nil
}

// splitCache serves the metadata-only objects (metav1.PartialObjectMetadata)
// of some kinds from a cache of their own, which no narrowing applies to,
// and everything else from the narrowed cache. controller-runtime applies a
// kind's narrowing to its metadata-only view as well; without this, a
// controller that hears of a user's Secret through a metadata-only watch
// would hear of none that is not Tend's.
type splitCache struct {
	cache.Cache // narrowed: typed objects, and other kinds' metadata
	metadata    cache.Cache
	kinds       map[schema.GroupVersionKind]bool
}

func newSplitCache(cfg *rest.Config, opts cache.Options, kinds []client.Object) (cache.Cache, error) {
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	narrowed, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	metaOpts := opts
	metaOpts.ByObject = nil
	metaOpts.DefaultTransform = stripMetadata
	metadata, err := cache.New(cfg, metaOpts)
	if err != nil {
		return nil, err
	}
	c := &splitCache{Cache: narrowed, metadata: metadata, kinds: map[schema.GroupVersionKind]bool{}}
	for _, obj := range kinds {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return nil, fmt.Errorf("the metadata cache of %T: %w", obj, err)
		}
		c.kinds[gvk] = true
	}
	return c, nil
}

// stripMetadata drops, from the metadata of objects the controllers did
// not make, what they never read and what may hold a Secret's data:
// managedFields, and the annotation in which kubectl apply keeps a copy of
// the whole object.
func stripMetadata(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil {
		if obj.GetManagedFields() != nil {
			obj.SetManagedFields(nil)
		}
		if a := obj.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			delete(a, corev1.LastAppliedConfigAnnotation)
			obj.SetAnnotations(a)
		}
	}
	return in, nil
}

// route returns the cache that serves obj.
func (c *splitCache) route(obj any) cache.Cache {
	var gvk schema.GroupVersionKind
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		gvk = o.GroupVersionKind()
	case *metav1.PartialObjectMetadataList:
		gvk = o.GroupVersionKind()
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	default:
		return c.Cache
	}
	if c.kinds[gvk] {
		return c.metadata
	}
	return c.Cache
}

func (c *splitCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.route(obj).Get(ctx, key, obj, opts...)
}

func (c *splitCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.route(list).List(ctx, list, opts...)
}

func (c *splitCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	return c.route(obj).GetInformer(ctx, obj, opts...)
}

func (c *splitCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	return c.route(obj).RemoveInformer(ctx, obj)
}

func (c *splitCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return c.route(obj).IndexField(ctx, obj, field, extract)
}

// Start runs both caches until ctx ends.
func (c *splitCache) Start(ctx context.Context) error {
	errs := make(chan error, 1)
	go func() { errs <- c.metadata.Start(ctx) }()
	err := c.Cache.Start(ctx)
	return errors.Join(err, <-errs)
}

func (c *splitCache) WaitForCacheSync(ctx context.Context) bool {
	narrowed := c.Cache.WaitForCacheSync(ctx)
	return c.metadata.WaitForCacheSync(ctx) && narrowed
}

// ReadThrough returns c, whose Gets of objects of the given kinds that c's
// cache does not hold are answered by live instead. It is for the kinds
// that the cache holds only Tend's objects of (Controller.Cache): a
// Secret that a user names, or a ConfigMap of Tend's that someone stripped
// of its label, is read from the apiserver, and a Get answers as it did
// when the cache held every object. A Get of an object that does not exist
// costs a request; of one that the cache holds, none. Lists are not
// changed: they list what the cache holds.
func ReadThrough(c client.Client, live client.Reader, kinds ...client.Object) client.Client {
	rt := readThrough{Client: c, live: live, kinds: map[reflect.Type]bool{}}
	for _, k := range kinds {
		rt.kinds[reflect.TypeOf(k)] = true
	}
	return rt
}

type readThrough struct {
	client.Client
	live  client.Reader
	kinds map[reflect.Type]bool
}

func (r readThrough) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Client.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) && r.kinds[reflect.TypeOf(obj)] {
		return r.live.Get(ctx, key, obj, opts...)
	}
	return err
}

// watched returns the cache's DefaultNamespaces for --watch-namespaces: nil
// (every namespace) for an empty list.
func watched(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = cache.Config{}
	}
	return out
}
