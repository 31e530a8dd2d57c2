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

// memberData is where the members' pods run and where their data lives.
type memberData struct {
	// ips are the member pods' IPs by the members' DNS names.
	ips map[string]string
	// holders are the UIDs of the objects that hold each member's data,
	// by member name: its volume claim, or with ephemeral storage its pod.
	holders map[string]types.UID
	// pvcs are the cluster's volume claims.
	pvcs []corev1.PersistentVolumeClaim
	// pods are the member pods by name, those being deleted included.
	pods map[string]*corev1.Pod
	// marks are the member IDs that the members' volume claims carry
	// (annotationMemberID), and created when each claim was made, by
	// member name; persistent storage only.
	marks   map[string]string
	created map[string]time.Time
	// formed is when the cluster had formed: the init Job's creation. Zero
	// when there is no init Job.
	formed time.Time
}

// observeData lists the member pods of sts, from the apiserver (the
// manager does not cache them), and the volume claims, from the cache.
// Pods that only carry the members' labels, and claims made for an older
// cluster of the same name, are none of the members'.
func (r *Reconciler) observeData(ctx context.Context, c *etcdv1alpha1.EtcdCluster, sts *appsv1.StatefulSet) (memberData, error) {
	d := memberData{ips: map[string]string{}, holders: map[string]types.UID{}, pods: map[string]*corev1.Pod{},
		marks: map[string]string{}, created: map[string]time.Time{}}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(selector(c))); err != nil {
		return d, fmt.Errorf("listing member pods: %w", err)
	}
	for i, p := range pods.Items {
		if !isMemberPod(c, sts, &p) {
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

// markDataLoss carries each member's data holder over from the last status
// and marks the members whose data is gone. Such a member may still answer
// for a while, from an empty data directory under its old ID, which etcd
// accepts and raft does not survive; it must be replaced at once. Two
// records tell, so that losing one cannot hide a loss:
//   - the status: a member first seen healthy on one volume claim (or
//     ephemeral pod) that now has another one lost its data with the old
//     one;
//   - the objects: every voter's claim carries its member ID (a learner
//     is promoted only once its claim does, and the first members' claims
//     are marked when first seen healthy). A voter on a claim without a
//     mark that was made after the cluster formed (the init Job) has a new,
//     empty volume: its data is gone even if the status was lost or is
//     stale.
//
// A member seen for the first time, or not yet healthy, is recorded on the
// holder it has.
func markDataLoss(views []memberView, last []etcdv1alpha1.Member, data memberData) []memberView {
	for i := range views {
		v := &views[i]
		for _, m := range last {
			if m.Name == v.Name && m.ID == v.ID.String() {
				v.DataHolder = m.VolumeUID
			}
		}
		now := data.holders[v.Name]
		v.Marked = data.marks[v.Name] == v.ID.String()
		switch {
		case now == "":
			// Deleted, or not made yet: nothing to compare.
		case v.DataHolder != "" && v.DataHolder != now:
			v.DataLost = true
		case !v.IsLearner && data.marks[v.Name] == "" && !data.formed.IsZero() && data.created[v.Name].After(data.formed):
			v.DataLost = true
		case v.DataHolder == "" && v.Healthy:
			v.DataHolder = now
		}
	}
	return views
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
