package v1beta1

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// ConversionDataAnnotation holds, on a PodSet stored as v1alpha1, what a
// v1beta1 client wrote that v1alpha1 cannot express, so that the object
// reads back through v1beta1 exactly as it was written. Today that is
// spec.leader when spec.leaderElection alone would not give it back: an
// explicit `leader: {election: Disabled}`, which v1alpha1's false cannot
// tell from no leader at all. Without it, `kubectl apply` and GitOps tools
// would see that field vanish and report drift forever.
//
// Conversion to v1beta1 restores the data and removes the annotation, so
// v1beta1 clients never see it. v1alpha1 clients do, and should leave it
// alone; if they change spec.leaderElection, the stale data is ignored and
// v1alpha1's value wins. This is how Cluster API carries data between
// versions (its cluster.x-k8s.io/conversion-data).
const ConversionDataAnnotation = "apps.tend.dev/conversion-data"

// conversionData is the JSON value of ConversionDataAnnotation: the v1beta1
// fields that v1alpha1 could not hold, as the client wrote them.
type conversionData struct {
	Leader *Leader `json:"leader,omitempty"`
}

var _ conversion.Convertible = &PodSet{}

// ConvertTo converts this PodSet to the hub version, v1alpha1.
func (src *PodSet) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*appsv1alpha1.PodSet)
	if !ok {
		return fmt.Errorf("converting a PodSet from %s: unexpected hub %T", GroupVersion, hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = specToHub(src.Spec.DeepCopy())
	dst.Status = appsv1alpha1.PodSetStatus(*src.Status.DeepCopy())
	return putConversionData(&dst.Annotations, lostInHub(&src.Spec))
}

// ConvertFrom converts the hub version, v1alpha1, to this PodSet.
func (dst *PodSet) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*appsv1alpha1.PodSet)
	if !ok {
		return fmt.Errorf("converting a PodSet to %s: unexpected hub %T", GroupVersion, hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = specFromHub(src.Spec.DeepCopy())
	dst.Status = PodSetStatus(*src.Status.DeepCopy())
	restore(&dst.Spec, takeConversionData(&dst.Annotations))
	return nil
}

// specToHub converts a spec to v1alpha1. It takes ownership of in.
func specToHub(in *PodSetSpec) appsv1alpha1.PodSetSpec {
	return appsv1alpha1.PodSetSpec{
		Replicas:       in.Replicas,
		Template:       in.Template,
		LeaderElection: electionToHub(in.Leader),
	}
}

// specFromHub converts a spec from v1alpha1. It takes ownership of in.
func specFromHub(in *appsv1alpha1.PodSetSpec) PodSetSpec {
	return PodSetSpec{
		Replicas: in.Replicas,
		Template: in.Template,
		Leader:   leaderFromHub(in.LeaderElection),
	}
}

// electionToHub is v1alpha1's leaderElection for a v1beta1 leader: only
// Enabled elects.
func electionToHub(l *Leader) bool {
	return l != nil && l.Election == LeaderElectionEnabled
}

// leaderFromHub is the v1beta1 leader for v1alpha1's leaderElection: no
// leader object when election is off, as a PodSet created through v1alpha1
// never had one.
func leaderFromHub(election bool) *Leader {
	if !election {
		return nil
	}
	return &Leader{Election: LeaderElectionEnabled}
}

// lostInHub returns what of spec would not come back from v1alpha1, or nil
// when everything would.
func lostInHub(spec *PodSetSpec) *conversionData {
	if sameLeader(leaderFromHub(electionToHub(spec.Leader)), spec.Leader) {
		return nil
	}
	return &conversionData{Leader: spec.Leader.DeepCopy()}
}

// restore puts back into spec, converted from v1alpha1, what the v1beta1
// client wrote and v1alpha1 could not hold. Data that v1alpha1 has since
// contradicted (a v1alpha1 client changed leaderElection) is stale and left
// out: the stored object wins.
func restore(spec *PodSetSpec, data *conversionData) {
	if data == nil {
		return
	}
	if data.Leader != nil && electionToHub(data.Leader) == electionToHub(spec.Leader) {
		spec.Leader = data.Leader
	}
}

func sameLeader(a, b *Leader) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// putConversionData stores data in the annotation, or removes the
// annotation when there is nothing to carry (it may be a stale copy that a
// client sent back).
func putConversionData(annotations *map[string]string, data *conversionData) error {
	if data == nil {
		delete(*annotations, ConversionDataAnnotation)
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encoding the %s annotation: %w", ConversionDataAnnotation, err)
	}
	if *annotations == nil {
		*annotations = map[string]string{}
	}
	(*annotations)[ConversionDataAnnotation] = string(raw)
	return nil
}

// takeConversionData removes the annotation and returns its data. An
// annotation that does not parse (someone edited it) is dropped: failing
// the conversion would make the PodSet, and every list that includes it,
// unreadable through v1beta1.
func takeConversionData(annotations *map[string]string) *conversionData {
	raw, ok := (*annotations)[ConversionDataAnnotation]
	if !ok {
		return nil
	}
	delete(*annotations, ConversionDataAnnotation)
	if len(*annotations) == 0 {
		*annotations = nil
	}
	var data conversionData
	if err := json.Unmarshal([]byte(raw), &data); err != nil {
		return nil
	}
	return &data
}
