package v1beta1

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

var (
	enabled  = &Leader{Election: LeaderElectionEnabled}
	disabled = &Leader{Election: LeaderElectionDisabled}
)

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
	}
}

func TestConvertTo(t *testing.T) {
	for _, tc := range []struct {
		name            string
		annotations     map[string]string
		leader          *Leader
		wantElection    bool
		wantAnnotations map[string]string
	}{
		{name: "no leader", wantElection: false},
		{name: "election enabled", leader: enabled, wantElection: true},
		{name: "explicit Disabled is carried", leader: disabled, wantElection: false,
			wantAnnotations: map[string]string{ConversionDataAnnotation: `{"leader":{"election":"Disabled"}}`}},
		{name: "an empty leader is carried", leader: &Leader{}, wantElection: false,
			wantAnnotations: map[string]string{ConversionDataAnnotation: `{"leader":{}}`}},
		{name: "other annotations stay", annotations: map[string]string{"team": "a"}, leader: disabled,
			wantAnnotations: map[string]string{"team": "a", ConversionDataAnnotation: `{"leader":{"election":"Disabled"}}`}},
		{name: "a stale copy sent back by a client is dropped", leader: enabled,
			annotations:     map[string]string{"team": "a", ConversionDataAnnotation: `{"leader":{"election":"Disabled"}}`},
			wantElection:    true,
			wantAnnotations: map[string]string{"team": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			src := &PodSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: tc.annotations},
				Spec:       PodSetSpec{Replicas: ptr.To[int32](3), Template: template(), Leader: tc.leader},
				Status:     PodSetStatus{Replicas: 3, Leader: "web-a", Selector: "apps.tend.dev/podset=web"},
			}
			dst := &appsv1alpha1.PodSet{}
			g.Expect(src.ConvertTo(dst)).To(Succeed())
			g.Expect(dst.Spec).To(Equal(appsv1alpha1.PodSetSpec{
				Replicas: ptr.To[int32](3), Template: template(), LeaderElection: tc.wantElection,
			}))
			g.Expect(dst.Status).To(Equal(appsv1alpha1.PodSetStatus{Replicas: 3, Leader: "web-a", Selector: "apps.tend.dev/podset=web"}))
			g.Expect(dst.Name).To(Equal("web"))
			if tc.wantAnnotations == nil {
				g.Expect(dst.Annotations).To(BeEmpty())
			} else {
				g.Expect(dst.Annotations).To(Equal(tc.wantAnnotations))
			}
		})
	}
}

func TestConvertFrom(t *testing.T) {
	for _, tc := range []struct {
		name            string
		election        bool
		annotations     map[string]string
		wantLeader      *Leader
		wantAnnotations map[string]string
	}{
		{name: "election off: no leader object", election: false, wantLeader: nil},
		{name: "election on", election: true, wantLeader: enabled},
		{name: "carried Disabled is restored and the annotation removed", election: false,
			annotations: map[string]string{ConversionDataAnnotation: `{"leader":{"election":"Disabled"}}`},
			wantLeader:  disabled},
		{name: "other annotations stay", election: false,
			annotations:     map[string]string{"team": "a", ConversionDataAnnotation: `{"leader":{"election":"Disabled"}}`},
			wantLeader:      disabled,
			wantAnnotations: map[string]string{"team": "a"}},
		{name: "data that v1alpha1 contradicts since is ignored", election: true,
			annotations: map[string]string{ConversionDataAnnotation: `{"leader":{"election":"Disabled"}}`},
			wantLeader:  enabled},
		{name: "an annotation that does not parse is dropped", election: false,
			annotations: map[string]string{ConversionDataAnnotation: `{"leader":`},
			wantLeader:  nil},
		{name: "an annotation without a leader changes nothing", election: true,
			annotations: map[string]string{ConversionDataAnnotation: `{}`},
			wantLeader:  enabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			src := &appsv1alpha1.PodSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: tc.annotations},
				Spec:       appsv1alpha1.PodSetSpec{Replicas: ptr.To[int32](3), Template: template(), LeaderElection: tc.election},
				Status:     appsv1alpha1.PodSetStatus{Replicas: 3, PodNames: []string{"web-a"}, ObservedGeneration: 2},
			}
			dst := &PodSet{}
			g.Expect(dst.ConvertFrom(src)).To(Succeed())
			g.Expect(dst.Spec).To(Equal(PodSetSpec{Replicas: ptr.To[int32](3), Template: template(), Leader: tc.wantLeader}))
			g.Expect(dst.Status).To(Equal(PodSetStatus{Replicas: 3, PodNames: []string{"web-a"}, ObservedGeneration: 2}))
			g.Expect(dst.Annotations).To(Equal(tc.wantAnnotations))
			g.Expect(src.Annotations).To(Equal(tc.annotations), "the hub is not changed")
		})
	}
}

func TestElection(t *testing.T) {
	for _, tc := range []struct {
		leader *Leader
		want   bool
	}{
		{leader: nil, want: false},
		{leader: &Leader{}, want: false},
		{leader: disabled, want: false},
		{leader: enabled, want: true},
		{leader: &Leader{Election: "enabled"}, want: false},
	} {
		NewWithT(t).Expect(electionToHub(tc.leader)).To(Equal(tc.want), "%+v", tc.leader)
		if tc.want {
			NewWithT(t).Expect(leaderFromHub(tc.want)).To(Equal(tc.leader))
		}
	}
	NewWithT(t).Expect(leaderFromHub(false)).To(BeNil())
}
