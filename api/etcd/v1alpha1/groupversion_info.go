// Package v1alpha1 holds the etcd.tend.dev/v1alpha1 API: EtcdCluster, an
// etcd cluster that Tend creates, scales, heals, backs up and reports on;
// EtcdBackup, one verified backup of it; EtcdBackupSchedule, backups on a
// cron schedule with retention; and EtcdRestore, a restore of an existing
// cluster in place.
//
// It holds types, validation markers and constants only; the behaviour lives
// in internal/controller/etcdcluster and internal/controller/etcdbackup.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.tend.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "etcd.tend.dev", Version: "v1alpha1"}

	// SchemeBuilder adds this API's kinds to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&EtcdCluster{}, &EtcdClusterList{},
		&EtcdBackup{}, &EtcdBackupList{},
		&EtcdBackupSchedule{}, &EtcdBackupScheduleList{},
		&EtcdRestore{}, &EtcdRestoreList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
