package podset

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// leaderPlan is what the leader phase does with the pods it sees.
type leaderPlan struct {
	// keep is the pod that stays leader, if any.
	keep *corev1.Pod
	// unlabel are pods whose leader label must go: not Ready, terminating,
	// finished, or one leader too many.
	unlabel []*corev1.Pod
	// candidate is the pod to label once no pod carries the label.
	candidate *corev1.Pod
}

// planLeader decides the leader among pods, the PodSet's pods as the cache
// shows them (terminating ones included). A labelled pod that is still able
// to lead keeps the role, so that leadership does not move needlessly; of
// several, the longest-lived keeps it. Otherwise the longest-lived Ready pod
// is the candidate. With enabled false every label goes.
func planLeader(pods []*corev1.Pod, enabled bool) leaderPlan {
	var plan leaderPlan
	var labelled []*corev1.Pod
	for _, p := range pods {
		if p.Labels[appsv1alpha1.LabelRole] == appsv1alpha1.RoleLeader {
			labelled = append(labelled, p)
		}
	}
	if !enabled {
		plan.unlabel = labelled
		return plan
	}
	slices.SortFunc(labelled, oldestFirst)
	for _, p := range labelled {
		if plan.keep == nil && canLead(p) {
			plan.keep = p
			continue
		}
		plan.unlabel = append(plan.unlabel, p)
	}
	if plan.keep != nil {
		return plan
	}
	for _, p := range slices.SortedFunc(slices.Values(pods), oldestFirst) {
		if canLead(p) {
			plan.candidate = p
			break
		}
	}
	return plan
}

// canLead reports whether a pod may carry the leader label.
func canLead(p *corev1.Pod) bool { return isActive(p) && isReady(p) }

func oldestFirst(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// reconcileLeader keeps at most one pod labelled leader in line with
// spec.leaderElection. It returns the leader's name.
//
// Never two leaders: a new pod is labelled only once no pod carries the
// label, as the apiserver (not the cache) says, and every label change is a
// patch guarded by the pod's resourceVersion, so a pod that changed since it
// was read is judged again on the next pass.
func (r *Reconciler) reconcileLeader(ctx context.Context, ps *appsv1alpha1.PodSet, pods []*corev1.Pod) (string, error) {
	plan := planLeader(pods, ps.Spec.LeaderElection)
	for _, p := range plan.unlabel {
		if err := r.setRole(ctx, p, false); err != nil {
			return "", err
		}
	}
	if plan.keep != nil {
		return plan.keep.Name, nil
	}
	if plan.candidate == nil {
		return "", nil
	}
	// The cache said no pod leads. Ask the apiserver before labelling, so a
	// label written by the last pass that the cache has not shown yet is
	// never doubled.
	var live corev1.PodList
	if err := r.APIReader.List(ctx, &live, client.InNamespace(ps.Namespace), client.MatchingLabels{
		appsv1alpha1.LabelPodSet: ps.Name, appsv1alpha1.LabelRole: appsv1alpha1.RoleLeader,
	}); err != nil {
		return "", fmt.Errorf("listing leader pods: %w", err)
	}
	if len(live.Items) > 0 {
		// The cache is behind; the pod event that brings it up to date starts
		// the next pass, which judges these pods.
		return "", nil
	}
	if err := r.setRole(ctx, plan.candidate, true); err != nil {
		return "", err
	}
	r.event(ps, corev1.EventTypeNormal, "LeaderElected", "Elect", fmt.Sprintf("Pod %s is the leader", plan.candidate.Name))
	return plan.candidate.Name, nil
}

// setRole adds or removes the leader label on pod, guarded by its
// resourceVersion.
func (r *Reconciler) setRole(ctx context.Context, pod *corev1.Pod, leader bool) error {
	changed := pod.DeepCopy()
	patch := client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})
	if leader {
		if changed.Labels == nil {
			changed.Labels = map[string]string{}
		}
		changed.Labels[appsv1alpha1.LabelRole] = appsv1alpha1.RoleLeader
	} else {
		delete(changed.Labels, appsv1alpha1.LabelRole)
	}
	if err := r.Patch(ctx, changed, patch); err != nil {
		if !leader && apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("labelling pod %s (leader=%t): %w", pod.Name, leader, err)
	}
	return nil
}

// leaderService builds the Service that selects ps's leader pod. It exposes
// the template's container ports; with none, it is headless, so that the
// leader's address is still published in DNS and EndpointSlices.
// labelManagedBy, set to managedByTend, marks the objects that Tend made;
// the manager caches only those Services (manager.MadeByTend).
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedByTend  = "tend"
)

func leaderService(ps *appsv1alpha1.PodSet) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      appsv1alpha1.LeaderServiceName(ps.Name),
			Namespace: ps.Namespace,
			Labels:    map[string]string{appsv1alpha1.LabelPodSet: ps.Name, labelManagedBy: managedByTend},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{
				appsv1alpha1.LabelPodSet: ps.Name,
				appsv1alpha1.LabelRole:   appsv1alpha1.RoleLeader,
			},
		},
	}
	seen := map[string]bool{}
	for _, c := range ps.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
			key := fmt.Sprintf("%d/%s", p.ContainerPort, proto)
			if seen[key] {
				continue
			}
			seen[key] = true
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
				Name:       p.Name,
				Protocol:   proto,
				Port:       p.ContainerPort,
				TargetPort: intstr.FromInt32(p.ContainerPort),
			})
		}
	}
	if len(svc.Spec.Ports) == 0 {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	// A Service with several ports needs every port named.
	if len(svc.Spec.Ports) > 1 {
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].Name == "" {
				svc.Spec.Ports[i].Name = fmt.Sprintf("port-%d-%s", svc.Spec.Ports[i].Port, svc.Spec.Ports[i].Protocol)
			}
		}
	}
	return svc
}

// serviceObservation is what the leader phase found at the leader Service's
// name. Both fields are empty when election is off, or when the pass could
// not tell (the Service is being replaced, or a create met a Service that
// the cache did not show yet).
type serviceObservation struct {
	// ready: the Service is the PodSet's, and selects the leader.
	ready bool
	// taken is the condition's message when an object that the PodSet does
	// not control holds the name.
	taken string
}

// reconcileLeaderService creates, updates or deletes the leader Service. It
// writes only when the cached Service differs from the desired one.
//
// A Service of the same name that the PodSet does not control is never
// adopted, changed or deleted: it is reported, in the LeaderServiceReady
// condition and one Warning Event, and the pass goes on. Retrying cannot help
// until that Service's owner acts, and the Service's own events start the
// next pass then (see podSetsOfService).
func (r *Reconciler) reconcileLeaderService(ctx context.Context, ps *appsv1alpha1.PodSet) (serviceObservation, error) {
	want := leaderService(ps)
	have := &corev1.Service{}
	err := r.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) && ps.Spec.LeaderElection {
		// The cache holds only Services that Tend made: one that another
		// owner made, or an older Tend's without the label, is read live.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	}
	switch {
	case apierrors.IsNotFound(err):
		if !ps.Spec.LeaderElection {
			return serviceObservation{}, nil
		}
		if err := controllerutil.SetControllerReference(ps, want, r.Scheme()); err != nil {
			return serviceObservation{}, err
		}
		if err := r.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache is behind; the event of the Service that holds
				// the name starts the pass that judges it.
				return serviceObservation{}, nil
			}
			return serviceObservation{}, fmt.Errorf("creating Service %s: %w", want.Name, err)
		}
		return serviceObservation{ready: true}, nil
	case err != nil:
		return serviceObservation{}, fmt.Errorf("reading Service %s: %w", want.Name, err)
	}
	if !metav1.IsControlledBy(have, ps) {
		if !ps.Spec.LeaderElection {
			return serviceObservation{}, nil // not the PodSet's business
		}
		msg := serviceTakenMessage(ps, have)
		reported, err := r.takenReported(ctx, ps, msg)
		if err != nil {
			return serviceObservation{}, err
		}
		if !reported {
			r.Recorder.Eventf(ps, have, corev1.EventTypeWarning, appsv1alpha1.ReasonServiceNameTaken, "Create", "%s", msg)
		}
		return serviceObservation{taken: msg}, nil
	}
	headless := have.Spec.ClusterIP == corev1.ClusterIPNone
	// Turning a headless Service into one with a virtual IP, or back, is not
	// an update the apiserver allows: replace it.
	if !ps.Spec.LeaderElection || headless != (want.Spec.ClusterIP == corev1.ClusterIPNone) {
		if err := r.Delete(ctx, have, client.Preconditions{UID: &have.UID}); err != nil && !apierrors.IsNotFound(err) {
			return serviceObservation{}, fmt.Errorf("deleting Service %s: %w", want.Name, err)
		}
		return serviceObservation{}, nil // the delete event starts the pass that creates it anew
	}
	if equality.Semantic.DeepEqual(have.Spec.Selector, want.Spec.Selector) &&
		equality.Semantic.DeepEqual(have.Spec.Ports, want.Spec.Ports) &&
		have.Labels[appsv1alpha1.LabelPodSet] == ps.Name && have.Labels[labelManagedBy] == managedByTend {
		return serviceObservation{ready: true}, nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	have.Spec.Selector = want.Spec.Selector
	have.Spec.Ports = want.Spec.Ports
	if have.Labels == nil {
		have.Labels = map[string]string{}
	}
	have.Labels[appsv1alpha1.LabelPodSet] = ps.Name
	have.Labels[labelManagedBy] = managedByTend // into the cache (an older Tend's lacked it)
	if err := r.Patch(ctx, have, patch); err != nil {
		return serviceObservation{}, fmt.Errorf("updating Service %s: %w", want.Name, err)
	}
	return serviceObservation{ready: true}, nil
}

// serviceTakenMessage says that svc, which ps does not control, holds the
// name of ps's leader Service: who holds it, and what to do.
func serviceTakenMessage(ps *appsv1alpha1.PodSet, svc *corev1.Service) string {
	holder := "has no controller"
	if ref := metav1.GetControllerOfNoCopy(svc); ref != nil {
		holder = fmt.Sprintf("is controlled by %s %s", ref.Kind, ref.Name)
		if podSetControllerOf(svc) != nil && ref.Name == ps.Name {
			// A PodSet of the same name that was deleted and created again:
			// the garbage collector deletes the old one's Service.
			holder = fmt.Sprintf("is controlled by an earlier PodSet %s (UID %s) that the garbage collector has yet to clean up after", ref.Name, ref.UID)
		}
	}
	return fmt.Sprintf("Service %s already exists and %s, so Tend cannot publish the leader behind it and leaves it alone. "+
		"To let Tend create its own, delete that Service or have its owner name it otherwise; or turn leader election off. "+
		"Leader election goes on without the Service (the leader carries %s=%s)",
		svc.Name, holder, appsv1alpha1.LabelRole, appsv1alpha1.RoleLeader)
}

// takenReported reports whether ps's status already says msg, so that the
// Warning Event about a clash goes out when the clash is new, or its holder
// changed, and not on every pass. ps.Status is the status this pass read.
// The cache often lags the last pass's status write, and the pod events of
// that pass's creates start the next pass at once; so before saying no it
// asks the apiserver, which has that write (passes for one PodSet never
// overlap).
func (r *Reconciler) takenReported(ctx context.Context, ps *appsv1alpha1.PodSet, msg string) (bool, error) {
	if conditionSays(ps.Status.Conditions, msg) {
		return true, nil
	}
	fresh := &appsv1alpha1.PodSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ps), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // gone: nobody to tell
		}
		return false, fmt.Errorf("reading the PodSet's status: %w", err)
	}
	return fresh.UID == ps.UID && conditionSays(fresh.Status.Conditions, msg), nil
}

// conditionSays reports whether conds hold a False LeaderServiceReady
// condition with the reason ServiceNameTaken and the message msg.
func conditionSays(conds []metav1.Condition, msg string) bool {
	c := meta.FindStatusCondition(conds, appsv1alpha1.ConditionLeaderServiceReady)
	return c != nil && c.Status == metav1.ConditionFalse &&
		c.Reason == appsv1alpha1.ReasonServiceNameTaken && c.Message == msg
}
