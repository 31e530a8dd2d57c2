package webhook_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	appsv1beta1 "github.com/tend-dev/tend/api/apps/v1beta1"
	"github.com/tend-dev/tend/internal/testing/loopback"
	"github.com/tend-dev/tend/internal/webhook"
)

// These tests write PodSets through one version and read them through the
// other, through the real apiserver, which calls the suite's manager to
// convert.

var (
	enabled  = &appsv1beta1.Leader{Election: appsv1beta1.LeaderElectionEnabled}
	disabled = &appsv1beta1.Leader{Election: appsv1beta1.LeaderElectionDisabled}
	// carriedDisabled is the annotation that carries an explicit Disabled.
	carriedDisabled = `{"leader":{"election":"Disabled"}}`
)

func template(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sleep", Image: "docker.io/library/busybox:1.35.0", Command: []string{"sleep", "3600"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
	}
}

func v1alpha1PodSet(ns, name string, replicas int32, election bool) *appsv1alpha1.PodSet {
	return &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"tier": "db"}, Annotations: map[string]string{"team": "storage"}},
		Spec: appsv1alpha1.PodSetSpec{Replicas: ptr.To(replicas), Template: template(name), LeaderElection: election},
	}
}

func v1beta1PodSet(ns, name string, replicas int32, leader *appsv1beta1.Leader) *appsv1beta1.PodSet {
	return &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"tier": "db"}, Annotations: map[string]string{"team": "storage"}},
		Spec: appsv1beta1.PodSetSpec{Replicas: ptr.To(replicas), Template: template(name), Leader: leader.DeepCopy()},
	}
}

// read gets the PodSet called like key as the version of into.
func read[T client.Object](g Gomega, key client.Object, into T) T {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(key), into)).To(Succeed())
	return into
}

func TestCreatedAsV1alpha1ReadsAsV1beta1(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	for _, tc := range []struct {
		election   bool
		wantLeader *appsv1beta1.Leader
	}{
		{election: true, wantLeader: enabled},
		{election: false, wantLeader: nil},
	} {
		created := v1alpha1PodSet(ns, "", 3, tc.election)
		created.GenerateName = "db-"
		g.Expect(env.Client.Create(t.Context(), created)).To(Succeed())

		got := read(g, created, &appsv1beta1.PodSet{})
		g.Expect(got.UID).To(Equal(created.UID))
		g.Expect(got.ResourceVersion).To(Equal(created.ResourceVersion))
		g.Expect(got.Labels).To(Equal(created.Labels))
		g.Expect(got.Annotations).To(Equal(created.Annotations))
		g.Expect(got.Spec.Replicas).To(Equal(ptr.To[int32](3)))
		g.Expect(got.Spec.Template).To(Equal(created.Spec.Template))
		g.Expect(got.Spec.Leader).To(Equal(tc.wantLeader))

		again := read(g, created, &appsv1alpha1.PodSet{})
		g.Expect(again).To(Equal(created), "reading through v1beta1 changed nothing")
	}
}

func TestCreatedAsV1beta1CarriesWhatV1alpha1CannotHold(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name         string
		leader       *appsv1beta1.Leader
		wantLeader   *appsv1beta1.Leader
		wantElection bool
		wantCarried  bool
	}{
		{name: "enabled", leader: enabled, wantLeader: enabled, wantElection: true},
		{name: "no-leader", leader: nil, wantLeader: nil},
		{name: "explicit-disabled", leader: disabled, wantLeader: disabled, wantCarried: true},
		// The apiserver defaults election before the webhook sees it.
		{name: "empty-leader", leader: &appsv1beta1.Leader{}, wantLeader: disabled, wantCarried: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			created := v1beta1PodSet(ns, tc.name, 2, tc.leader)
			g.Expect(env.Client.Create(t.Context(), created)).To(Succeed())
			g.Expect(created.Spec.Leader).To(Equal(tc.wantLeader))
			g.Expect(created.Annotations).To(Equal(map[string]string{"team": "storage"}))

			stored := read(g, created, &appsv1alpha1.PodSet{})
			g.Expect(stored.Spec.LeaderElection).To(Equal(tc.wantElection))
			g.Expect(stored.Spec.Template).To(Equal(created.Spec.Template))
			if tc.wantCarried {
				g.Expect(stored.Annotations).To(HaveKeyWithValue(appsv1beta1.ConversionDataAnnotation, carriedDisabled))
			} else {
				g.Expect(stored.Annotations).NotTo(HaveKey(appsv1beta1.ConversionDataAnnotation))
			}

			g.Expect(read(g, created, &appsv1beta1.PodSet{})).To(Equal(created))
		})
	}
}

func TestUpdatesThroughEitherVersionLoseNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ps := v1alpha1PodSet(env.Namespace(t), "db", 2, false)
	g.Expect(env.Client.Create(ctx, ps)).To(Succeed())
	ps.Status = appsv1alpha1.PodSetStatus{Replicas: 2, ReadyReplicas: 1, PodNames: []string{"db-a", "db-b"},
		Selector: "apps.tend.dev/podset=db", ObservedGeneration: 1,
		Conditions: []metav1.Condition{{Type: appsv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse,
			Reason: appsv1alpha1.ReasonReplicasNotReady, Message: "1 of 2 pods Ready", LastTransitionTime: metav1.Now()}}}
	g.Expect(env.Client.Status().Update(ctx, ps)).To(Succeed())
	status := ps.Status

	// A v1beta1 client scales up, makes the disabled election explicit, and
	// adds a label.
	beta := read(g, ps, &appsv1beta1.PodSet{})
	beta.Spec.Replicas = ptr.To[int32](4)
	beta.Spec.Leader = disabled.DeepCopy()
	beta.Labels["owner"] = "beta"
	g.Expect(env.Client.Update(ctx, beta)).To(Succeed())

	stored := read(g, ps, &appsv1alpha1.PodSet{})
	g.Expect(stored.Spec).To(Equal(appsv1alpha1.PodSetSpec{Replicas: ptr.To[int32](4), Template: template("db")}))
	g.Expect(stored.Labels).To(Equal(map[string]string{"tier": "db", "owner": "beta"}))
	g.Expect(stored.Annotations).To(Equal(map[string]string{"team": "storage", appsv1beta1.ConversionDataAnnotation: carriedDisabled}))
	g.Expect(stored.Status).To(Equal(status), "a write of the main resource leaves status alone")

	// A v1alpha1 client that changes something else sends the annotation
	// back unchanged; the carried field survives.
	stored.Labels["owner"] = "alpha"
	g.Expect(env.Client.Update(ctx, stored)).To(Succeed())
	beta = read(g, ps, &appsv1beta1.PodSet{})
	g.Expect(beta.Spec.Leader).To(Equal(disabled))
	g.Expect(beta.Labels).To(HaveKeyWithValue("owner", "alpha"))
	g.Expect(beta.Annotations).To(Equal(map[string]string{"team": "storage"}))
	g.Expect(beta.Status.PodNames).To(Equal(status.PodNames))
	g.Expect(beta.Status.Conditions).To(HaveLen(1))

	// So does another v1beta1 update, which resends the whole spec.
	beta.Spec.Replicas = ptr.To[int32](5)
	g.Expect(env.Client.Update(ctx, beta)).To(Succeed())
	g.Expect(read(g, ps, &appsv1beta1.PodSet{}).Spec.Leader).To(Equal(disabled))
	g.Expect(read(g, ps, &appsv1alpha1.PodSet{}).Spec.Replicas).To(Equal(ptr.To[int32](5)))
}

func TestAV1alpha1ChangeWinsOverCarriedData(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ps := v1beta1PodSet(env.Namespace(t), "db", 1, disabled)
	g.Expect(env.Client.Create(ctx, ps)).To(Succeed())

	stored := read(g, ps, &appsv1alpha1.PodSet{})
	patch := client.MergeFrom(stored.DeepCopy())
	stored.Spec.LeaderElection = true
	g.Expect(env.Client.Patch(ctx, stored, patch)).To(Succeed())
	g.Expect(stored.Annotations).To(HaveKey(appsv1beta1.ConversionDataAnnotation), "stale until the next v1beta1 write")

	beta := read(g, ps, &appsv1beta1.PodSet{})
	g.Expect(beta.Spec.Leader).To(Equal(enabled))
	g.Expect(beta.Annotations).To(Equal(map[string]string{"team": "storage"}))

	// The next write through v1beta1 drops the stale copy.
	beta.Labels["touched"] = "yes"
	g.Expect(env.Client.Update(ctx, beta)).To(Succeed())
	g.Expect(read(g, ps, &appsv1alpha1.PodSet{}).Annotations).To(Equal(map[string]string{"team": "storage"}))
}

func TestStatusAndScaleThroughV1beta1(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ps := v1beta1PodSet(env.Namespace(t), "db", 1, disabled)
	g.Expect(env.Client.Create(ctx, ps)).To(Succeed())

	ps.Status = appsv1beta1.PodSetStatus{Replicas: 1, ReadyReplicas: 1, PodNames: []string{"db-a"},
		Selector: "apps.tend.dev/podset=db", ObservedGeneration: 1}
	g.Expect(env.Client.Status().Update(ctx, ps)).To(Succeed())
	g.Expect(read(g, ps, &appsv1alpha1.PodSet{}).Status).To(Equal(appsv1alpha1.PodSetStatus(ps.Status)))

	// kubectl scale and HPAs read and write /scale of whichever version
	// they were pointed at.
	scale := &autoscalingv1.Scale{}
	g.Expect(env.Client.SubResource("scale").Get(ctx, ps, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Selector).To(Equal("apps.tend.dev/podset=db"))
	scale.Spec.Replicas = 3
	g.Expect(env.Client.SubResource("scale").Update(ctx, ps, client.WithSubResourceBody(scale))).To(Succeed())

	beta := read(g, ps, &appsv1beta1.PodSet{})
	g.Expect(beta.Spec.Replicas).To(Equal(ptr.To[int32](3)))
	g.Expect(beta.Spec.Leader).To(Equal(disabled), "the carried field survives a write through /scale")
	stored := read(g, ps, &appsv1alpha1.PodSet{})
	g.Expect(stored.Spec.Replicas).To(Equal(ptr.To[int32](3)))
	g.Expect(stored.Annotations).To(HaveKeyWithValue(appsv1beta1.ConversionDataAnnotation, carriedDisabled))
}

func TestListsConvertEveryItem(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	g.Expect(env.Client.Create(t.Context(), v1alpha1PodSet(ns, "alpha", 1, true))).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), v1beta1PodSet(ns, "beta", 1, disabled))).To(Succeed())

	var betas appsv1beta1.PodSetList
	g.Expect(env.Client.List(t.Context(), &betas, client.InNamespace(ns))).To(Succeed())
	leaders := map[string]*appsv1beta1.Leader{}
	for _, ps := range betas.Items {
		leaders[ps.Name] = ps.Spec.Leader
	}
	g.Expect(leaders).To(Equal(map[string]*appsv1beta1.Leader{"alpha": enabled, "beta": disabled}))

	var alphas appsv1alpha1.PodSetList
	g.Expect(env.Client.List(t.Context(), &alphas, client.InNamespace(ns))).To(Succeed())
	g.Expect(alphas.Items).To(HaveLen(2))
}

// The v1beta1 schema keeps v1alpha1's validation, with the same messages.
func TestV1beta1Validation(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name    string
		spec    func(*appsv1beta1.PodSetSpec)
		wantErr string // empty: accepted
	}{
		{name: "minimal"},
		{name: "zero replicas", spec: func(s *appsv1beta1.PodSetSpec) { s.Replicas = ptr.To[int32](0) }},
		{name: "leader election", spec: func(s *appsv1beta1.PodSetSpec) { s.Leader = enabled.DeepCopy() }},
		{name: "an unknown election", spec: func(s *appsv1beta1.PodSetSpec) { s.Leader = &appsv1beta1.Leader{Election: "On"} },
			wantErr: `spec.leader.election: Unsupported value: "On": supported values: "Disabled", "Enabled"`},
		{name: "negative replicas", spec: func(s *appsv1beta1.PodSetSpec) { s.Replicas = ptr.To[int32](-1) },
			wantErr: "spec.replicas in body should be greater than or equal to 0"},
		{name: "no containers", spec: func(s *appsv1beta1.PodSetSpec) { s.Template.Spec.Containers = []corev1.Container{} },
			wantErr: "spec.template.spec.containers must list at least one container"},
		{name: "selector label in template", spec: func(s *appsv1beta1.PodSetSpec) {
			s.Template.Labels[appsv1alpha1.LabelPodSet] = "other"
		}, wantErr: "spec.template.metadata.labels must not set apps.tend.dev/podset: Tend sets it to the PodSet's name and selects the pods by it; remove it from the template"},
		{name: "role label in template", spec: func(s *appsv1beta1.PodSetSpec) {
			s.Template.Labels[appsv1alpha1.LabelRole] = appsv1alpha1.RoleLeader
		}, wantErr: "spec.template.metadata.labels must not set tend.dev/role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ps := v1beta1PodSet(ns, "", 1, nil)
			ps.GenerateName = "ps-"
			ps.Spec.Replicas = nil
			if tc.spec != nil {
				tc.spec(&ps.Spec)
			}
			err := env.Client.Create(context.Background(), ps)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ps.Spec.Replicas).NotTo(BeNil(), "defaulted")
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// The CRDs that the webhook converts exist under the names the certificate
// rotator injects the CA into, and their versions look the same to kubectl.
func TestConvertedCRDs(t *testing.T) {
	g := NewWithT(t)
	crds := crdClient(t)
	g.Expect(webhook.CRDNames()).NotTo(BeEmpty())
	for _, name := range webhook.CRDNames() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(crds.Get(t.Context(), client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter))
		g.Expect(len(crd.Spec.Versions)).To(BeNumerically(">", 1))
		first := crd.Spec.Versions[0]
		for _, v := range crd.Spec.Versions {
			g.Expect(v.Storage).To(Equal(v.Name == "v1alpha1"), "%s: v1alpha1 stays the storage version", v.Name)
			g.Expect(v.AdditionalPrinterColumns).To(Equal(first.AdditionalPrinterColumns), v.Name)
			g.Expect(v.Subresources).To(Equal(first.Subresources), v.Name)
		}
	}
}

// crdClient reads CRDs, which Tend's scheme does not know.
func crdClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	NewWithT(t).Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(env.Config, client.Options{Scheme: s})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

func TestReadyzReportsTheWebhook(t *testing.T) {
	body, err := loopback.Get(probeURL + "/readyz?verbose")
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(ContainSubstring("[+]webhook ok"))
}
