package etcdcluster

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// claimView is one member's volume claim as a growth of spec.storage.size
// sees it.
type claimView struct {
	name string
	// request is what the claim asks for, capacity what its volume has.
	request, capacity int64
	// class is the claim's StorageClass; canExpand tells whether it
	// allows expansion (allowVolumeExpansion), read only for a claim below
	// the spec's size.
	class     string
	canExpand bool
	// resizing is the claim's resize condition (Resizing,
	// FileSystemResizePending, ControllerResizeError, NodeResizeError),
	// with its message.
	resizing string
}

// claimViewOf reads pvc.
func claimViewOf(pvc *corev1.PersistentVolumeClaim) claimView {
	v := claimView{name: pvc.Name, class: ptr.Deref(pvc.Spec.StorageClassName, "")}
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
	// of <want> (<condition>)"; stuck the claims whose class cannot grow.
	grow     []string
	resizing []string
	stuck    []string
}

// planVolumes is what makes every member claim have size: claims that ask
// for less grow where their class allows it; the others are stuck (their
// data can move to larger volumes only through a restore into a new
// cluster). A claim that asks for size but whose volume is smaller is
// being resized.
func planVolumes(size int64, claims []claimView) volumeStep {
	var st volumeStep
	for _, v := range claims {
		switch {
		case v.request < size && v.canExpand:
			st.grow = append(st.grow, v.name)
		case v.request < size:
			st.stuck = append(st.stuck, fmt.Sprintf("%s (StorageClass %q)", v.name, v.class))
		case v.capacity < size:
			what := fmt.Sprintf("%s: %s of %s", v.name, bytesOf(v.capacity), bytesOf(size))
			if v.resizing != "" {
				what += " (" + v.resizing + ")"
			}
			st.resizing = append(st.resizing, what)
		}
	}
	slices.Sort(st.grow)
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
