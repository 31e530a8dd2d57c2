package etcdcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestRunsAs(t *testing.T) {
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}
	})
	want := statefulSet(c, 0, Bootstrap{}).Spec.Template
	// A pod as an older Tend's StatefulSet made it, as the apiserver
	// stores it: other bootstrap settings, defaulted fields, no revision.
	pod := func(change func(*corev1.Container)) *corev1.Pod {
		t := statefulSet(c, 3, Bootstrap{Members: []string{"main-0", "main-1", "main-2"}, State: "new"}).Spec.Template
		p := &corev1.Pod{Spec: *t.Spec.DeepCopy()}
		ctr := &p.Spec.Containers[0]
		for i := range ctr.Env {
			if f := ctr.Env[i].ValueFrom; f != nil && f.FieldRef != nil {
				f.FieldRef.APIVersion = "v1"
			}
		}
		ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
		ctr.TerminationMessagePath = "/dev/termination-log"
		if change != nil {
			change(ctr)
		}
		return p
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		same bool
	}{
		{name: "the same, as the apiserver defaults it", pod: pod(nil), same: true},
		{name: "another image", pod: pod(func(c *corev1.Container) { c.Image = "etcd:other" })},
		{name: "other resources", pod: pod(func(c *corev1.Container) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		})},
		{name: "another setting", pod: pod(func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "ETCD_SNAPSHOT_COUNT", Value: "5"})
		})},
		{name: "no etcd container", pod: &corev1.Pod{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(runsAs(tc.pod, want)).To(Equal(tc.same))
		})
	}
}
