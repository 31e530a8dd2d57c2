package manager

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCacheForMergesNarrowings(t *testing.T) {
	secrets := func(by cache.ByObject) map[client.Object]cache.ByObject {
		return map[client.Object]cache.ByObject{&corev1.Secret{}: by}
	}
	tests := []struct {
		name        string
		controllers []Controller
		wantErr     string
		wantLabel   string // the Secret narrowing's selector
		metadata    bool   // whether the metadata has a cache of its own
	}{
		{name: "none", controllers: []Controller{{Name: "a"}}},
		{name: "one", controllers: []Controller{{Name: "a", Cache: secrets(MadeByTend())}},
			wantLabel: "app.kubernetes.io/managed-by=tend"},
		{name: "two the same way", controllers: []Controller{
			{Name: "a", Cache: secrets(MadeByTend())}, {Name: "b", Cache: secrets(MadeByTend())},
		}, wantLabel: "app.kubernetes.io/managed-by=tend"},
		{name: "two differently", controllers: []Controller{
			{Name: "a", Cache: secrets(MadeByTend())}, {Name: "b", Cache: secrets(WithLabel("x"))},
		}, wantErr: "controllers a and b narrow the cache of *v1.Secret differently"},
		{name: "metadata", controllers: []Controller{
			{Name: "a", Cache: secrets(MadeByTend())}, {Name: "b", Metadata: []client.Object{&corev1.Secret{}}},
		}, wantLabel: "app.kubernetes.io/managed-by=tend", metadata: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			opts, newCache, err := CacheFor(tt.controllers)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(opts.DefaultTransform).NotTo(BeNil(), "managedFields are always stripped")
			if tt.wantLabel == "" {
				g.Expect(opts.ByObject).To(BeEmpty())
			} else {
				g.Expect(opts.ByObject).To(HaveLen(1))
				for _, by := range opts.ByObject {
					g.Expect(by.Label.String()).To(Equal(tt.wantLabel))
				}
			}
			// With a mapper given, building a cache reaches no apiserver.
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
			opts.Mapper = mapper
			c, err := newCache(&rest.Config{Host: "http://127.0.0.1:1"}, opts)
			g.Expect(err).NotTo(HaveOccurred())
			_, split := c.(*splitCache)
			g.Expect(split).To(Equal(tt.metadata))
		})
	}
}

func TestMadeByTendIgnoresOtherManagers(t *testing.T) {
	g := NewWithT(t)
	sel := MadeByTend().Label
	g.Expect(sel.Matches(labels.Set{LabelManagedBy: "tend"})).To(BeTrue())
	g.Expect(sel.Matches(labels.Set{LabelManagedBy: "Helm"})).To(BeFalse())
	g.Expect(sel.Matches(labels.Set{"etcd.tend.dev/cluster": "a"})).To(BeFalse())
}

func TestStripMetadata(t *testing.T) {
	g := NewWithT(t)
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name:          "s",
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{}}`, "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Labels:        map[string]string{"a": "b"},
	}}
	out, err := stripMetadata(obj)
	g.Expect(err).NotTo(HaveOccurred())
	got := out.(*metav1.PartialObjectMetadata)
	g.Expect(got.Annotations).To(Equal(map[string]string{"keep": "me"}))
	g.Expect(got.ManagedFields).To(BeNil())
	g.Expect(got.Labels).To(Equal(map[string]string{"a": "b"}))
}

func TestSplitCacheRoutes(t *testing.T) {
	g := NewWithT(t)
	narrowed, metadata := &fakeCache{}, &fakeCache{}
	c := &splitCache{Cache: narrowed, metadata: metadata, kinds: map[schema.GroupVersionKind]bool{
		corev1.SchemeGroupVersion.WithKind("Secret"): true,
	}}
	meta := func(kind string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		return m
	}
	metaList := func(kind string) *metav1.PartialObjectMetadataList {
		m := &metav1.PartialObjectMetadataList{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		return m
	}
	g.Expect(c.route(meta("Secret"))).To(BeIdenticalTo(metadata))
	g.Expect(c.route(metaList("SecretList"))).To(BeIdenticalTo(metadata))
	g.Expect(c.route(&corev1.Secret{})).To(BeIdenticalTo(narrowed))
	g.Expect(c.route(&corev1.SecretList{})).To(BeIdenticalTo(narrowed))
	g.Expect(c.route(meta("ConfigMap"))).To(BeIdenticalTo(narrowed))
}

// fakeCache is a cache that route can return; it serves nothing.
type fakeCache struct{ cache.Cache }
