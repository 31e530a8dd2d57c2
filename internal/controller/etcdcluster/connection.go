package etcdcluster

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/tend-dev/tend/internal/etcdnames"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/podspec"
)

// connectionConfigMap is what clients and Tend's own backup pods need to
// reach the cluster, less the secrets: the client Service's URL, every
// member's URL, the CA of the members' certificates, and the name of the
// Secret with a client certificate. size is how many members the
// StatefulSet runs.
func connectionConfigMap(c *etcdv1alpha1.EtcdCluster, size int32, ca []byte) *corev1.ConfigMap {
	endpoints := make([]string, 0, size)
	for i := range int(size) {
		endpoints = append(endpoints, memberClientURL(c, memberName(c, i)))
	}
	return &corev1.ConfigMap{
		ObjectMeta: meta(c, etcdnames.ConnectionName(c)),
		Data: map[string]string{
			podspec.ConnectionEndpoint:     clientEndpoint(c),
			podspec.ConnectionEndpoints:    strings.Join(endpoints, ","),
			podspec.ConnectionCA:           string(ca),
			podspec.ConnectionClientSecret: etcdnames.ClientTLSSecret(c),
			podspec.ConnectionVersion:      cmp.Or(c.Spec.Version, etcdv1alpha1.DefaultVersion),
		},
	}
}

// connectionVolumes are what an agent's pod mounts to reach the cluster
// as Tend: the connection ConfigMap and the client certificate's Secret,
// both read-only.
func connectionVolumes(c *etcdv1alpha1.EtcdCluster) ([]corev1.Volume, []corev1.VolumeMount) {
	return []corev1.Volume{
			{Name: "connection", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: etcdnames.ConnectionName(c)},
			}}},
			{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: etcdnames.ClientTLSSecret(c)}}},
		}, []corev1.VolumeMount{
			{Name: "connection", MountPath: podspec.ConnectionDir, ReadOnly: true},
			{Name: "client-tls", MountPath: podspec.ClientTLSDir, ReadOnly: true},
		}
}

// reconcileConnection publishes the connection ConfigMap, after the
// StatefulSet phase so that it lists every member that may run.
func (r *Reconciler) reconcileConnection(ctx context.Context, s *scope) error {
	c := s.cluster
	size := replicas(c)
	if s.sts != nil {
		size = max(size, ptr.Deref(s.sts.Spec.Replicas, 0))
	}
	server := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: tlsSecretsOf(c).Server}, server); err != nil {
		return fmt.Errorf("reading the server certificate's CA: %w", err)
	}
	want := connectionConfigMap(c, size, server.Data["ca.crt"])
	cm := &corev1.ConfigMap{ObjectMeta: want.ObjectMeta}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if !equality.Semantic.DeepEqual(cm.Data, want.Data) {
			cm.Data = want.Data
		}
		cm.Labels = want.Labels
		return controllerutil.SetControllerReference(c, cm, r.Scheme())
	}); err != nil {
		return fmt.Errorf("writing ConfigMap %s: %w", want.Name, err)
	}
	return nil
}
