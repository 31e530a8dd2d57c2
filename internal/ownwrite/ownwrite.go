// Package ownwrite tells a controller's pass that the object its cache gave
// it is older than the controller's own last write of that object.
//
// A pass on such a copy decides from a status that does not show what the
// pass before did, and does it again: a member restarted twice, a queue it
// just created taken for one to adopt. Another event (an owned object that
// the same pass made) can start that pass before the informer has the
// write. The controller records each write's result with Wrote and, at the
// start of a pass, waits instead of acting while Behind says so. Losing the
// record on a restart loses nothing: a new manager's cache starts from the
// apiserver.
package ownwrite

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Log is, per object, the resourceVersion of the controller's last write of
// it, until the cache has caught up. The zero Log is ready to use.
type Log struct {
	last sync.Map // types.NamespacedName → string
}

// Wrote records obj as the apiserver returned it from a write.
func (l *Log) Wrote(obj client.Object) {
	l.last.Store(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
}

// Behind tells whether obj, as the cache gave it, is older than the last
// write recorded for it. Versions are compared as the apiserver allows
// (etcd's revisions, comparable integers); one that is not comparable is
// taken as current. Once the cache has caught up the record is dropped.
func (l *Log) Behind(obj client.Object) bool {
	key := client.ObjectKeyFromObject(obj)
	v, ok := l.last.Load(key)
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), v.(string))
	if err != nil || cmp >= 0 {
		l.last.CompareAndDelete(key, v) // caught up
		return false
	}
	return true
}

// Forget drops the record of an object that is gone.
func (l *Log) Forget(key types.NamespacedName) {
	l.last.Delete(key)
}
