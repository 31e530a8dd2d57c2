package etcdcluster

import (
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// wrote remembers the resourceVersion that Tend's own write of c gave it
// (c as the apiserver returned it).
func (r *Reconciler) wrote(c *etcdv1alpha1.EtcdCluster) {
	r.written.Store(client.ObjectKeyFromObject(c), c.ResourceVersion)
}

// behindOwnWrite tells whether c, as the manager's cache gave it, is older
// than Tend's last write of it. A pass on such a copy would decide from a
// status that does not show what the pass before did (a member restarted,
// a recovery begun) and do it again, and its own status write would be
// refused. Versions are compared as the apiserver allows (etcd's revisions,
// comparable integers); one that is not comparable is taken as current.
func (r *Reconciler) behindOwnWrite(c *etcdv1alpha1.EtcdCluster) bool {
	key := client.ObjectKeyFromObject(c)
	v, ok := r.written.Load(key)
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(c.ResourceVersion, v.(string))
	if err != nil || cmp >= 0 {
		r.written.CompareAndDelete(key, v) // caught up
		return false
	}
	return true
}
