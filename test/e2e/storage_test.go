//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A volume that the default StorageClass provisions keeps what one pod wrote
// for the next pod: a Job writes a file, then another pod reads it back.
func TestVolumeOutlivesThePodThatWroteIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	token := fmt.Sprintf("written-by-the-job-%d", rand.Int64())

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")},
			},
		},
	}
	if err := cluster.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}

	writer := cluster.BusyboxJob(ns, "writer", `echo "$TOKEN" > /data/token && sync`)
	withVolume(&writer.Spec.Template.Spec, "data")
	writer.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", Value: token}}
	if err := cluster.Client.Create(ctx, writer); err != nil {
		t.Fatal(err)
	}
	cluster.WaitForJobComplete(t, ns, "writer")

	reader := cluster.BusyboxPod(ns, "reader", "cat /data/token")
	withVolume(&reader.Spec, "data")
	if err := cluster.Client.Create(ctx, reader); err != nil {
		t.Fatal(err)
	}
	cluster.WaitForPodPhase(t, ns, "reader", corev1.PodSucceeded)
	if got := strings.TrimSpace(cluster.PodLogs(t, ns, "reader", "reader")); got != token {
		t.Errorf("the reader read %q, want %q", got, token)
	}

	// The claim was bound to a volume made for it by the default class.
	if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != cluster.Settings.StorageClass {
		t.Errorf("the claim is %s with class %v, want Bound with the default class %s", pvc.Status.Phase, pvc.Spec.StorageClassName, cluster.Settings.StorageClass)
	}
}

// withVolume mounts the claim at /data in every container of spec.
func withVolume(spec *corev1.PodSpec, claim string) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         "data",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
	})
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	}
}
