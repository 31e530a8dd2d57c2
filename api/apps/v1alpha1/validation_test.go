package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/testenv"
)

// These tests send PodSets to a real apiserver, so they prove what the CRD's
// OpenAPI schema and CEL rules accept, and the messages users read.

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

func podSet(ns, name string, mutate func(*appsv1alpha1.PodSetSpec)) *appsv1alpha1.PodSet {
	ps := &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1alpha1.PodSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "sleep", Image: "docker.io/library/busybox:1.35.0", Command: []string{"sleep", "3600"},
			}}},
		}},
	}
	if mutate != nil {
		mutate(&ps.Spec)
	}
	return ps
}

func TestPodSetValidation(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name    string
		objName string // empty: generated from "ps-"
		spec    func(*appsv1alpha1.PodSetSpec)
		wantErr string // empty: accepted
	}{
		{name: "minimal"},
		{name: "name of 56 characters", objName: strings.Repeat("p", 56)},
		{name: "name of 57 characters", objName: strings.Repeat("p", 57),
			wantErr: "a PodSet's name is at most 56 characters: its leader Service is named <name>-leader"},
		{name: "zero replicas", spec: func(s *appsv1alpha1.PodSetSpec) { s.Replicas = ptr.To[int32](0) }},
		{name: "leader election", spec: func(s *appsv1alpha1.PodSetSpec) { s.LeaderElection = true }},
		{name: "negative replicas", spec: func(s *appsv1alpha1.PodSetSpec) { s.Replicas = ptr.To[int32](-1) },
			wantErr: "spec.replicas in body should be greater than or equal to 0"},
		{name: "no containers", spec: func(s *appsv1alpha1.PodSetSpec) { s.Template.Spec.Containers = []corev1.Container{} },
			wantErr: "spec.template.spec.containers must list at least one container"},
		{name: "selector label in template", spec: func(s *appsv1alpha1.PodSetSpec) {
			s.Template.Labels[appsv1alpha1.LabelPodSet] = "other"
		}, wantErr: "spec.template.metadata.labels must not set apps.tend.dev/podset: Tend sets it to the PodSet's name and selects the pods by it; remove it from the template"},
		{name: "role label in template", spec: func(s *appsv1alpha1.PodSetSpec) {
			s.Template.Labels[appsv1alpha1.LabelRole] = appsv1alpha1.RoleLeader
		}, wantErr: "spec.template.metadata.labels must not set tend.dev/role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ps := podSet(ns, tc.objName, tc.spec)
			if tc.objName == "" {
				ps.GenerateName = "ps-"
			}
			err := env.Client.Create(context.Background(), ps)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestPodSetDefaultsAndKeepsTemplateLabels(t *testing.T) {
	g := NewWithT(t)
	ps := podSet(env.Namespace(t), "web", nil)
	g.Expect(env.Client.Create(context.Background(), ps)).To(Succeed())
	// replicas defaults to 1, and the template's metadata survives pruning.
	g.Expect(ps.Spec.Replicas).To(Equal(ptr.To[int32](1)))
	g.Expect(ps.Spec.Template.Labels).To(Equal(map[string]string{"app": "web"}))
}
