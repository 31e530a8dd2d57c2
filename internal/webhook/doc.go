// Package webhook serves what the apiserver asks of Tend's manager beyond
// reconciling: the conversion webhook between the versions of a CRD (today
// PodSet's v1alpha1 and v1beta1), and the certificate it serves with.
//
// The manager runs it whatever --controllers selects: while a CRD
// serves two versions, every read or write of the version that is not
// stored needs it. It starts serving only once its certificate is ready,
// and /readyz says so until then, so the webhook Service never routes the
// apiserver to a replica that cannot answer.
//
// A manager started with Options.Disabled (--webhook-disabled) serves no
// webhook and touches neither the CRDs nor a certificate: it is a second
// manager on a cluster whose CRDs another Tend's webhook serves for every
// namespace (docs/helm.md), and its readiness waits for nothing here.
//
// The certificate is either rotated here (CertModeRotate: a CA and serving
// certificate in a Secret, the CA injected into the CRDs, by
// github.com/open-policy-agent/cert-controller) or provided by someone else
// (CertModeExternal: cert-manager, or envtest in tests), as files in the
// certificate directory.
//
// The conversions themselves live beside the API types (api/<group>/<version>);
// this package only registers them. It must not reconcile anything else.
// And the manager's own controllers must keep reading the stored version:
// in CertModeRotate the webhook serves only after the manager's caches have
// synced, so a cache of a converted version would wait for itself.
package webhook
