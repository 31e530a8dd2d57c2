package webhook

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The rotator watches every CRD (it cannot be told to watch one by name)
// and updates the converted ones, and keeps its Secret in the manager's
// namespace, where it watches all Secrets. config/default's namePrefix and
// namespace give the names below.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=update,resourceNames=podsets.apps.tend.dev
// +kubebuilder:rbac:groups="",namespace=tend-system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=tend-system,resources=secrets,verbs=update,resourceNames=tend-webhook-server-cert

// Webhooks is the manager's webhook server and the management of its
// certificate.
type Webhooks struct {
	opts   Options
	server *gatedServer
	// certReady is closed by the rotator once the certificate is in
	// CertDir and its CA in every CRD (CertModeRotate).
	certReady chan struct{}
}

// New checks opts and returns the webhook server they describe. Pass
// Server() as the manager's WebhookServer, then call Setup.
func New(opts Options) (*Webhooks, error) {
	opts, err := opts.resolve(os.ReadFile)
	if err != nil {
		return nil, err
	}
	w := &Webhooks{opts: opts, certReady: make(chan struct{})}
	w.server = &gatedServer{
		Server: webhook.NewServer(webhook.Options{
			Port:    opts.Port,
			CertDir: opts.CertDir,
			// HTTP/2 is off, as for metrics: its rapid-reset weakness
			// (CVE-2023-44487) is not worth the gain, and the apiserver
			// speaks HTTP/1.1 to webhooks as well.
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		}),
	}
	switch {
	case opts.Disabled:
		// Setup never adds the server to the manager; should anything
		// start it, it waits for ever rather than serve.
		w.server.certReady = channelClosed(nil)
		w.server.waitingFor = "nothing: the webhooks are disabled (--webhook-disabled)"
	case opts.CertMode == CertModeRotate:
		w.server.certReady = channelClosed(w.certReady)
		w.server.waitingFor = fmt.Sprintf("the certificate in Secret %s/%s to be mounted at %s and its CA injected into %v",
			opts.Namespace, opts.CertSecret, opts.CertDir, opts.CRDs)
	case opts.CertMode == CertModeExternal:
		w.server.certReady = certFilesExist(opts.CertDir)
		w.server.waitingFor = fmt.Sprintf("tls.crt and tls.key in %s", opts.CertDir)
	}
	return w, nil
}

// Server is the webhook server, for the manager's options.
func (w *Webhooks) Server() webhook.Server { return w.server }

// Setup registers the conversion webhooks with mgr, whose WebhookServer
// must be Server(); in CertModeRotate, the certificate rotator; and a
// readiness check, "webhook", that passes once the server serves. With
// Disabled options it does none of this: the server is never added to mgr,
// so it never listens, nothing watches the CRDs or the Secret, and no
// readiness check waits for a certificate that will never come.
func (w *Webhooks) Setup(mgr ctrl.Manager) error {
	if w.opts.Disabled {
		mgr.GetLogger().WithName("webhook").Info("Serving no webhook and leaving the CRDs' conversion webhook alone (--webhook-disabled)")
		return nil
	}
	if mgr.GetWebhookServer() != w.server {
		return fmt.Errorf("the manager's webhook server is not the one webhook.New built")
	}
	if err := setupConversion(mgr); err != nil {
		return err
	}
	if w.opts.CertMode == CertModeRotate {
		if err := rotator.AddRotator(mgr, w.rotator()); err != nil {
			return fmt.Errorf("adding the webhook certificate rotator: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck("webhook", w.server.StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook readiness check: %w", err)
	}
	return nil
}

// rotator describes the certificates that CertModeRotate keeps. It runs on
// every replica, not only the leader: each serves the webhook, and the
// Secret's resourceVersion settles who writes first.
func (w *Webhooks) rotator() *rotator.CertRotator {
	infos := make([]rotator.WebhookInfo, 0, len(w.opts.CRDs))
	for _, crd := range w.opts.CRDs {
		infos = append(infos, rotator.WebhookInfo{Name: crd, Type: rotator.CRDConversion})
	}
	return &rotator.CertRotator{
		SecretKey:             types.NamespacedName{Namespace: w.opts.Namespace, Name: w.opts.CertSecret},
		CertDir:               w.opts.CertDir,
		CAName:                "tend-webhook-ca",
		CAOrganization:        "tend",
		DNSName:               serviceHost(w.opts.Service, w.opts.Namespace),
		IsReady:               w.certReady,
		Webhooks:              infos,
		FieldOwner:            "tend-webhook-cert-rotator",
		RequireLeaderElection: false,
		// Inject the CA only once this replica has the certificate.
		EnableReadinessCheck: true,
		ControllerName:       "webhook-cert-rotator",
	}
}
