package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// claimView is one member's volume claim as a growth of spec.storage.size
// sees it.
type claimView struct {
	name string
	// member is the member whose claim it is; volume the PersistentVolume
	// it is bound to, if any.
	member, volume string
	uid            types.UID
	// request is what the claim asks for, capacity what its volume has.
	request, capacity int64
	// class is the claim's StorageClass; canExpand tells whether it
	// allows expansion (allowVolumeExpansion), read only for a claim below
	// the spec's size. otherClass: spec.storage.storageClassName names
	// another class.
	class      string
	canExpand  bool
	otherClass bool
	// resizing is the claim's resize condition (Resizing,
	// FileSystemResizePending, ControllerResizeError, NodeResizeError),
	// with its message.
	resizing string
}

// claimViewOf reads pvc.
func claimViewOf(pvc *corev1.PersistentVolumeClaim) claimView {
	v := claimView{name: pvc.Name, uid: pvc.UID, volume: pvc.Spec.VolumeName, class: ptr.Deref(pvc.Spec.StorageClassName, "")}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		v.request = q.Value()
	}
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		v.capacity = q.Value()
	}
	for _, cond := range pvc.Status.Conditions {
		if cond.Status == corev1.ConditionTrue {
			v.resizing = string(cond.Type)
			if cond.Message != "" {
				v.resizing += ": " + cond.Message
			}
		}
	}
	return v
}

// volumeStep is what growing the volumes needs now.
type volumeStep struct {
	// grow are the claims to ask for the new size; resizing the claims
	// that asked and whose volume does not have it yet, as "<claim>: <have>
	// of <want> (<condition>)"; migrate the claims whose members must move
	// onto new claims: their class is not the spec's, or cannot grow.
	grow     []string
	resizing []string
	migrate  []claimView
}

// planVolumes is what makes every member claim have size and the spec's
// class: claims of another class move (migrate), whatever their size;
// claims that ask for less grow where their class allows it, and move
// where it does not. A claim that asks for size but whose volume is
// smaller is being resized.
func planVolumes(size int64, claims []claimView) volumeStep {
	var st volumeStep
	for _, v := range claims {
		switch {
		case v.otherClass:
			st.migrate = append(st.migrate, v)
		case v.request < size && v.canExpand:
			st.grow = append(st.grow, v.name)
		case v.request < size:
			st.migrate = append(st.migrate, v)
		case v.capacity < size:
			what := fmt.Sprintf("%s: %s of %s", v.name, bytesOf(v.capacity), bytesOf(size))
			if v.resizing != "" {
				what += " (" + v.resizing + ")"
			}
			st.resizing = append(st.resizing, what)
		}
	}
	slices.Sort(st.grow)
	slices.SortFunc(st.migrate, func(a, b claimView) int { return cmp.Compare(a.name, b.name) })
	return st
}

// bytesOf prints a size as a quantity, such as 512Mi.
func bytesOf(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// storageSize is spec.storage.size as a byte count.
func storageSize(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}
