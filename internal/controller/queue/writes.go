package queue

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheLagRetry is how soon a pass that found the cache behind the
// controller's own last write looks again. The Queue's status-only updates
// start no pass (the For predicate), so the retry is on a timer.
const cacheLagRetry = 250 * time.Millisecond

// writeLog remembers, for each Queue, the resourceVersion that the
// controller's last write of it returned, until the cache shows it. A pass
// on an older copy would act on the Queue as it was before that write: with
// the status of a queue it just created still empty, it would take its own
// queue for one to adopt (an Adopted event, a new lastSyncTime) and write the
// status a second time. Another event (the ConfigMap that the same pass
// published) can start that pass before the Queue's informer has the write.
// The EtcdCluster controller does the same (its written.go).
type writeLog struct {
	last sync.Map // types.NamespacedName → resourceVersion
}

// wrote records obj as the apiserver returned it from a write.
func (w *writeLog) wrote(obj client.Object) {
	w.last.Store(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
}

// behind tells whether obj, as the cache gave it, is older than the
// controller's last write of it. Versions are compared as the apiserver
// allows (etcd's revisions, comparable integers); one that is not
// comparable is taken as current.
func (w *writeLog) behind(obj client.Object) bool {
	key := client.ObjectKeyFromObject(obj)
	v, ok := w.last.Load(key)
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), v.(string))
	if err != nil || cmp >= 0 {
		w.last.CompareAndDelete(key, v) // caught up
		return false
	}
	return true
}

// forget drops the record of a Queue that is gone.
func (w *writeLog) forget(key types.NamespacedName) {
	w.last.Delete(key)
}
