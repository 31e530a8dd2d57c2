package webhook

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CertMode says who provides the webhook's serving certificate.
type CertMode string

const (
	// CertModeRotate: the manager keeps a CA and a serving certificate for
	// the webhook Service in a Secret, renews them before they expire, and
	// injects the CA into the CRDs' conversion webhooks. The Secret must
	// exist (config/webhook ships it empty) and be mounted at the
	// certificate directory, which is where the server reads them from.
	CertModeRotate CertMode = "rotate"
	// CertModeExternal: someone else writes tls.crt and tls.key into the
	// certificate directory and the CA into the CRDs: cert-manager in a
	// cluster, envtest in tests.
	CertModeExternal CertMode = "external"
)

var certModes = []CertMode{CertModeRotate, CertModeExternal}

// String implements flag.Value.
func (m *CertMode) String() string { return string(*m) }

// Set implements flag.Value; it accepts the known modes only.
func (m *CertMode) Set(s string) error {
	for _, known := range certModes {
		if CertMode(s) == known {
			*m = known
			return nil
		}
	}
	return fmt.Errorf("unknown certificate mode %q: use %q or %q", s, CertModeRotate, CertModeExternal)
}

// Options are the webhook server's settings. The manager binds them to its
// flags.
type Options struct {
	// Disabled: the manager serves no webhook, keeps no certificate and
	// leaves the CRDs' conversion webhook as it finds it; the rest is
	// ignored. This is for a second manager on a cluster, beside another
	// Tend whose webhook serves the shared CRDs' conversion for every
	// namespace (docs/helm.md). Its controllers read the stored version,
	// which needs no conversion.
	Disabled bool
	// Port is the port the server listens on, on every address.
	Port int
	// CertDir holds the serving certificate and key, tls.crt and tls.key.
	CertDir string
	// CertMode says who provides them.
	CertMode CertMode

	// The rest is used in CertModeRotate only.

	// CertSecret is the Secret, in Namespace, that holds the CA and the
	// serving certificate.
	CertSecret string
	// Service is the Service, in Namespace, through which the apiserver
	// calls the webhook. The certificate is for its DNS name.
	Service string
	// Namespace is CertSecret's and Service's. Empty means the manager's
	// own: the namespace of its pod.
	Namespace string
	// CRDs are the CRDs whose conversion webhook gets the CA. Nil means
	// CRDNames(); tests name CRDs of their own.
	CRDs []string
}

// DefaultOptions returns the settings that apply when no flag is given:
// those of config/default, where the kustomization's namePrefix "tend-"
// names the Secret and the Service.
func DefaultOptions() Options {
	return Options{
		Port:       9443,
		CertDir:    filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		CertMode:   CertModeRotate,
		CertSecret: "tend-webhook-server-cert",
		Service:    "tend-webhook-service",
	}
}

// BindFlags registers one flag per option on fs, with o's values as
// defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Disabled, "webhook-disabled", o.Disabled,
		"Serve no webhook, keep no certificate and leave the CRDs' conversion webhook alone (the other --webhook-* flags are then ignored): "+
			"for a manager beside another Tend on the same cluster, whose webhook serves the shared CRDs' conversion.")
	fs.IntVar(&o.Port, "webhook-port", o.Port,
		"Port the webhook server (the CRD conversion webhook) listens on.")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir,
		"Directory that holds the webhook's serving certificate and key, tls.crt and tls.key.")
	fs.Var(&o.CertMode, "webhook-cert-mode",
		`Who provides the webhook's serving certificate: "rotate" (the manager keeps a CA and certificate in --webhook-cert-secret, `+
			`mounted at --webhook-cert-dir, and injects the CA into the CRDs) or "external" (for example cert-manager, `+
			`which writes the files and the CRDs' caBundle).`)
	fs.StringVar(&o.CertSecret, "webhook-cert-secret", o.CertSecret,
		"Secret that holds the rotated CA and serving certificate (--webhook-cert-mode=rotate).")
	fs.StringVar(&o.Service, "webhook-service", o.Service,
		"Service through which the apiserver calls the webhook; the rotated certificate is for its DNS name.")
	fs.StringVar(&o.Namespace, "webhook-namespace", o.Namespace,
		"Namespace of --webhook-service and --webhook-cert-secret; in a pod it defaults to the pod's namespace.")
}

// inClusterNamespaceFile is where a pod finds its namespace.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// resolve checks o and fills in what defaults from the environment: in
// CertModeRotate, the namespace, read with readFile from the pod's service
// account. Disabled options need nothing.
func (o Options) resolve(readFile func(string) ([]byte, error)) (Options, error) {
	if o.Disabled {
		return o, nil
	}
	var errs []error
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d is not a port", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--webhook-cert-dir is empty"))
	}
	switch o.CertMode {
	case CertModeExternal:
	case CertModeRotate:
		if o.CertSecret == "" {
			errs = append(errs, errors.New("--webhook-cert-mode=rotate needs --webhook-cert-secret"))
		}
		if o.Service == "" {
			errs = append(errs, errors.New("--webhook-cert-mode=rotate needs --webhook-service"))
		}
		if o.Namespace == "" {
			ns, err := readFile(inClusterNamespaceFile)
			if err != nil || strings.TrimSpace(string(ns)) == "" {
				errs = append(errs, errors.New("--webhook-cert-mode=rotate needs the namespace of the webhook Service "+
					"and Secret: set --webhook-namespace, or run in a pod; outside the cluster, "+
					"use --webhook-cert-mode=external"))
			}
			o.Namespace = strings.TrimSpace(string(ns))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown --webhook-cert-mode %q", o.CertMode))
	}
	if o.CRDs == nil {
		o.CRDs = CRDNames()
	}
	return o, errors.Join(errs...)
}

// serviceHost is the name under which the apiserver reaches a Service, and
// so the name the serving certificate must carry.
func serviceHost(service, namespace string) string {
	return service + "." + namespace + ".svc"
}
