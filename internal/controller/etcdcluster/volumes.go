package etcdcluster

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// observeData lists the member pods of sts, from the controller's pod
// cache (a pod Tend deleted shows as deleting, even before the cache saw
// it: goingPods), and the volume claims, from the manager's cache. Pods
// that only carry the members' labels, and claims made for an older
// cluster of the same name, are none of the members'.
func (r *Reconciler) observeData(ctx context.Context, c *etcdv1alpha1.EtcdCluster, sts *appsv1.StatefulSet) (memberData, error) {
	d := memberData{ips: map[string]string{}, holders: map[string]types.UID{}, pods: map[string]*corev1.Pod{},
		marks: map[string]string{}, created: map[string]time.Time{}}
	var pods corev1.PodList
	if err := r.Pods.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(selector(c))); err != nil {
		return d, fmt.Errorf("listing member pods: %w", err)
	}
	r.going.apply(client.ObjectKeyFromObject(c), pods.Items)
	for i, p := range pods.Items {
		if !isMemberPod(c, sts, &p) {
			if awaitsAdoption(c, &p) {
				// Its StatefulSet was deleted keeping its pods (remade with
				// new claim templates): still dialled (TLS proves the member),
				// never acted on until the StatefulSet adopts it.
				d.orphans = append(d.orphans, p.Name)
				if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
					d.ips[memberHost(c, p.Name)] = p.Status.PodIP
				}
			}
			continue
		}
		d.pods[p.Name] = &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.PodIP != "" {
			d.ips[memberHost(c, p.Name)] = p.Status.PodIP
		}
		if c.Spec.Storage.Ephemeral {
			d.holders[p.Name] = p.UID
		}
	}
	if c.Spec.Storage.Ephemeral {
		return d, nil
	}
	pvcs, err := r.claimsOf(ctx, c)
	if err != nil {
		return d, err
	}
	d.pvcs = pvcs
	for _, pvc := range pvcs {
		if i, ok := isMemberPVC(c, &pvc); ok && pvc.DeletionTimestamp == nil {
			name := memberName(c, i)
			d.holders[name] = pvc.UID
			d.marks[name], d.created[name] = pvc.Annotations[annotationMemberID], pvc.CreationTimestamp.Time
		}
	}
	return d, nil
}

// reconcileVolumes keeps the members' volumes true to the membership:
//   - a volume is marked with the ID of the member that was seen healthy
//     on it;
//   - a volume marked for a member that is no longer in etcd holds data
//     that must not start again: it is deleted with its pod, and the pod
//     comes back with an empty one;
//   - a volume beyond the StatefulSet's size (a member scaled in) is
//     deleted.
func (r *Reconciler) reconcileVolumes(ctx context.Context, s *scope, views []memberView, pvcs []corev1.PersistentVolumeClaim) error {
	c := s.cluster
	byOrdinal := map[int]memberView{}
	for _, v := range views {
		byOrdinal[v.Ordinal] = v
	}
	size := int(ptr.Deref(s.sts.Spec.Replicas, 0))
	for i := range pvcs {
		pvc := &pvcs[i]
		ordinal, ok := isMemberPVC(c, pvc)
		if !ok || pvc.DeletionTimestamp != nil {
			continue
		}
		member, hasMember := byOrdinal[ordinal]
		marked := pvc.Annotations[annotationMemberID]
		switch {
		case ordinal >= size && !hasMember:
			if err := r.deleteExactly(ctx, "volume claim of a removed member", pvc); err != nil {
				return err
			}
			r.event(c, corev1.EventTypeNormal, "VolumeDeleted", "DeleteVolume", "Deleted volume claim %s: its member was removed", pvc.Name)
		case marked != "" && (!hasMember || marked != member.ID.String()):
			if err := r.deleteMemberData(ctx, s, ordinal); err != nil {
				return err
			}
		case hasMember && member.Healthy && marked != member.ID.String():
			if err := r.markClaim(ctx, pvc, member.ID.String()); err != nil {
				return err
			}
		}
	}
	return nil
}

// markClaim records on pvc the ID of the member whose data it holds.
func (r *Reconciler) markClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, id string) error {
	patch := client.MergeFrom(pvc.DeepCopy())
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[annotationMemberID] = id
	if err := r.Patch(ctx, pvc, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking volume claim %s: %w", pvc.Name, err)
	}
	return nil
}

// deleteMemberData deletes the member's volume claim and then its pod: the
// claim stays until the pod is gone, and the StatefulSet then makes both
// anew, empty.
func (r *Reconciler) deleteMemberData(ctx context.Context, s *scope, ordinal int) error {
	c := s.cluster
	if !c.Spec.Storage.Ephemeral {
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvcName(c, ordinal)}, pvc)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("reading volume claim %s: %w", pvcName(c, ordinal), err)
		}
		if err == nil {
			if _, ours := isMemberPVC(c, pvc); !ours {
				return notOurs(c, "PersistentVolumeClaim", pvc)
			}
			if err := r.deleteExactly(ctx, "volume claim", pvc); err != nil {
				return err
			}
		}
	}
	name := memberName(c, ordinal)
	pod := &corev1.Pod{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading pod %s: %w", name, err)
	}
	if err == nil {
		if !isMemberPod(c, s.sts, pod) {
			return notOurs(c, "Pod", pod)
		}
		if err := r.deleteMemberPod(ctx, c, pod, s.now); err != nil {
			return err
		}
	}
	r.event(c, corev1.EventTypeNormal, "MemberDataDeleted", "DeleteMemberData", "Deleted pod %s and its data: it starts again empty and joins as a new member", name)
	return nil
}
