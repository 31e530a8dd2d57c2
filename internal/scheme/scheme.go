package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	appsv1beta1 "github.com/tend-dev/tend/api/apps/v1beta1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// Scheme knows every kind that Tend reads or writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(appsv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(appsv1beta1.AddToScheme(Scheme))
	utilruntime.Must(sqsv1alpha1.AddToScheme(Scheme))
}
