package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// annotationTemplateHash on the StatefulSet is the hash of the pod
// template Tend last wrote, so that a pass compares its own output rather
// than an object the apiserver has filled with defaults.
const annotationTemplateHash = "etcd.tend.dev/template-hash"

// reconcileServices keeps the peer and client Services and the disruption
// budget as built, whatever was changed by hand.
func (r *Reconciler) reconcileServices(ctx context.Context, s *scope) error {
	c := s.cluster
	for _, want := range []*corev1.Service{peerService(c), clientService(c)} {
		svc := &corev1.Service{ObjectMeta: want.ObjectMeta}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
			svc.Labels = want.Labels
			svc.Spec.Selector = want.Spec.Selector
			svc.Spec.Ports = want.Spec.Ports
			svc.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
			if svc.CreationTimestamp.IsZero() {
				svc.Spec.ClusterIP = want.Spec.ClusterIP
			}
			return controllerutil.SetControllerReference(c, svc, r.Scheme())
		}); err != nil {
			return fmt.Errorf("writing Service %s: %w", want.Name, err)
		}
	}
	want := podDisruptionBudget(c, c.Status.Replicas)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: want.ObjectMeta}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, pdb, func() error {
		pdb.Labels = want.Labels
		pdb.Spec.MinAvailable = want.Spec.MinAvailable
		pdb.Spec.Selector = want.Spec.Selector
		return controllerutil.SetControllerReference(c, pdb, r.Scheme())
	}); err != nil {
		return fmt.Errorf("writing PodDisruptionBudget %s: %w", want.Name, err)
	}
	return nil
}

// errStatefulSetTaken stops a pass whose StatefulSet name another owner
// holds; the pass comes back.
var errStatefulSetTaken = errors.New("the StatefulSet's name is taken")

// reconcileStatefulSet creates the members' StatefulSet of a new cluster:
// every member starts at once and they form the cluster together. Later
// changes to it follow the membership (syncStatefulSet).
func (r *Reconciler) reconcileStatefulSet(ctx context.Context, s *scope) error {
	c := s.cluster
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: statefulSetName(c)}, sts)
	if err == nil && !metav1.IsControlledBy(sts, c) {
		// An older cluster's of the same name, on its way out (or
		// someone else's): its pods are not this cluster's members.
		s.obs.unreachable = fmt.Errorf("StatefulSet %s belongs to another owner (an older EtcdCluster of the same name being deleted?); waiting for it to go", sts.Name)
		s.requeueAfter(requeueUnreachable)
		return errStatefulSetTaken
	}
	if err == nil {
		s.sts = sts
		if sts.DeletionTimestamp != nil {
			// Deleted keeping its pods (a volume migration remakes it): it is
			// made again once the garbage collector has let the pods go.
			s.requeueAfter(time.Second)
		}
		if c.Annotations[etcdv1alpha1.AnnotationAdoptVolumes] == "true" {
			// Also for a cluster that adopted its volumes under a Tend that
			// did not relabel them.
			pvcs, err := r.claimsOf(ctx, c)
			if err != nil {
				return err
			}
			if err := r.adoptVolumes(ctx, c, pvcs); err != nil {
				return err
			}
		}
		if restoring(c) && c.Status.RestoredFrom == nil {
			// The pass that finished the restore made the StatefulSet, but
			// its status write was lost: what it restored is known still.
			return r.recordRestored(ctx, s)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading StatefulSet %s: %w", statefulSetName(c), err)
	}
	if c.Spec.Paused {
		return nil
	}
	if len(c.Status.Members) == 0 {
		ready, err := r.prepareNewCluster(ctx, s)
		if err != nil || !ready {
			return err
		}
	}
	n, boot := replicas(c), Bootstrap{State: "new"}
	for i := range n {
		boot.Members = append(boot.Members, memberName(c, int(i)))
	}
	if len(c.Status.Members) > 0 {
		// The cluster exists and only its StatefulSet was lost: members
		// with data rejoin it, empty ones join it (and are replaced).
		n, boot = int32(0), Bootstrap{State: "existing"}
		for _, m := range c.Status.Members {
			if i, ok := memberOrdinal(c, m.Name); ok {
				n = max(n, int32(i)+1)
				boot.Members = append(boot.Members, m.Name)
			}
		}
	}
	sts = memberStatefulSet(c, n, boot, r.AgentImage)
	stampTemplate(sts)
	if err := r.createOwned(ctx, c, sts); err != nil {
		return err
	}
	s.sts = sts
	if boot.State == "existing" && migrating(c.Status.Maintenance) {
		r.event(c, corev1.EventTypeNormal, "StatefulSetRemade", "CreateStatefulSet", "Made StatefulSet %s again, with claims of %s, for the %d known members; it adopts their pods", sts.Name, targetOf(c), len(boot.Members))
		return nil
	}
	if boot.State == "existing" {
		r.event(c, corev1.EventTypeWarning, "StatefulSetRecreated", "CreateStatefulSet", "Recreated the missing StatefulSet %s for the %d known members", sts.Name, len(boot.Members))
		return nil
	}
	r.event(c, corev1.EventTypeNormal, "Creating", "CreateStatefulSet", "Created StatefulSet %s: %d members form the cluster together", sts.Name, n)
	s.obs.creating = true
	s.requeueAfter(requeueUnreachable)
	return nil
}

// syncStatefulSet sizes the StatefulSet to hold every member and tells
// members that start afresh the current membership. Running members never
// restart for it: the update strategy is OnDelete, and etcd reads its
// bootstrap settings only from an empty data directory.
func (r *Reconciler) syncStatefulSet(ctx context.Context, s *scope, size int32, boot Bootstrap) error {
	want := memberStatefulSet(s.template(), size, boot, r.AgentImage)
	stampTemplate(want)
	sts := s.sts
	if ptr.Deref(sts.Spec.Replicas, 0) == size && sts.Annotations[annotationTemplateHash] == want.Annotations[annotationTemplateHash] {
		return nil
	}
	// A patch without a resourceVersion: Tend is the only writer of these
	// fields, and a cache that lags our last write must not fail the pass.
	patch := client.MergeFrom(sts)
	sts = sts.DeepCopy()
	sts.Spec.Replicas = ptr.To(size)
	sts.Spec.Template = want.Spec.Template
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[annotationTemplateHash] = want.Annotations[annotationTemplateHash]
	if err := r.Patch(ctx, sts, patch); err != nil {
		return fmt.Errorf("updating StatefulSet %s: %w", sts.Name, err)
	}
	s.sts = sts
	return nil
}

// stampTemplate records the hash of sts's pod template on it.
func stampTemplate(sts *appsv1.StatefulSet) {
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[annotationTemplateHash] = hashOf(sts.Spec.Template)
}

// reconcileInitJob creates the init Job once a quorum of the new cluster
// is healthy (and authentication, if wanted, is on). A completed Job stays
// as the record of the cluster's first check.
func (r *Reconciler) reconcileInitJob(ctx context.Context, s *scope) error {
	c := s.cluster
	if s.obs.job != jobNone || !s.obs.healthyQuorum || c.Spec.Paused {
		return nil
	}
	job := initJob(c)
	if err := r.createOwned(ctx, c, job); err != nil {
		return err
	}
	r.event(c, corev1.EventTypeNormal, "InitJobCreated", "CreateJob", "Created Job %s to check the new cluster", job.Name)
	s.obs.job = jobRunning
	return nil
}

// adoptVolumes makes an older cluster's volume claims this cluster's, as
// the annotation AnnotationAdoptVolumes asks: they are labelled with its
// UID, so that from now on this cluster marks, replaces and deletes them
// as its own, and the older cluster, if it comes back, does not.
func (r *Reconciler) adoptVolumes(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pvcs []corev1.PersistentVolumeClaim) error {
	for _, name := range staleVolumes(c, pvcs) {
		i := slices.IndexFunc(pvcs, func(p corev1.PersistentVolumeClaim) bool { return p.Name == name })
		pvc := &pvcs[i]
		patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		pvc.Labels[labelClusterUID] = string(c.UID)
		if err := r.Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("adopting volume claim %s: %w", pvc.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "VolumeAdopted", "AdoptVolume", "Adopted volume claim %s of an older cluster named %s (annotation %s)", pvc.Name, c.Name, etcdv1alpha1.AnnotationAdoptVolumes)
	}
	return nil
}

// prepareNewCluster checks, before a new cluster's StatefulSet is made,
// that no older cluster's volumes are in the way, and restores the members'
// data first when the spec asks for it. It tells whether the StatefulSet
// may be made now.
func (r *Reconciler) prepareNewCluster(ctx context.Context, s *scope) (bool, error) {
	c := s.cluster
	pvcs, err := r.claimsOf(ctx, c)
	if err != nil {
		return false, err
	}
	if c.Annotations[etcdv1alpha1.AnnotationAdoptVolumes] == "true" {
		if err := r.adoptVolumes(ctx, c, pvcs); err != nil {
			return false, err
		}
	} else {
		if stale := staleVolumes(c, pvcs); len(stale) > 0 {
			r.event(c, corev1.EventTypeWarning, "StaleVolumes", "CreateStatefulSet",
				"Not starting members on volume claims of an older cluster named %s: %s", c.Name, strings.Join(stale, ", "))
			s.obs.staleVolumes = stale
			s.requeueAfter(requeueSteady)
			return false, nil
		}
	}
	if restoring(c) && c.Status.RestoredFrom == nil {
		return r.reconcileRestore(ctx, s)
	}
	return true, nil
}
