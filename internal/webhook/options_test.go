package webhook

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"testing"

	. "github.com/onsi/gomega"
)

func TestResolve(t *testing.T) {
	inPod := func(string) ([]byte, error) { return []byte("tend-system\n"), nil }
	outside := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	rotate := DefaultOptions()
	external := DefaultOptions()
	external.CertMode = CertModeExternal
	for _, tc := range []struct {
		name          string
		opts          func(*Options)
		base          Options
		readFile      func(string) ([]byte, error)
		wantNamespace string
		wantErr       string
	}{
		{name: "rotate in a pod takes the pod's namespace", base: rotate, readFile: inPod, wantNamespace: "tend-system"},
		{name: "the flag wins over the pod's namespace", base: rotate, readFile: inPod,
			opts: func(o *Options) { o.Namespace = "ops" }, wantNamespace: "ops"},
		{name: "rotate outside a pod needs the flag", base: rotate, readFile: outside,
			wantErr: "set --webhook-namespace, or run in a pod; outside the cluster, use --webhook-cert-mode=external"},
		{name: "rotate needs a Secret", base: rotate, readFile: inPod,
			opts: func(o *Options) { o.CertSecret = "" }, wantErr: "needs --webhook-cert-secret"},
		{name: "rotate needs a Service", base: rotate, readFile: inPod,
			opts: func(o *Options) { o.Service = "" }, wantErr: "needs --webhook-service"},
		{name: "external needs no namespace", base: external, readFile: outside},
		{name: "a port out of range", base: external, readFile: outside,
			opts: func(o *Options) { o.Port = 70000 }, wantErr: "--webhook-port 70000 is not a port"},
		{name: "no certificate directory", base: external, readFile: outside,
			opts: func(o *Options) { o.CertDir = "" }, wantErr: "--webhook-cert-dir is empty"},
		{name: "an unknown mode", base: external, readFile: outside,
			opts: func(o *Options) { o.CertMode = "manual" }, wantErr: `unknown --webhook-cert-mode "manual"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := tc.base
			if tc.opts != nil {
				tc.opts(&o)
			}
			got, err := o.resolve(tc.readFile)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Namespace).To(Equal(tc.wantNamespace))
			g.Expect(got.CRDs).To(Equal([]string{"podsets.apps.tend.dev"}), "CRDs default to the converted ones")
		})
	}
}

// Disabled options need nothing: not the pod's namespace, a Secret, a
// Service or a certificate directory, none of which such a manager uses.
func TestResolveDisabled(t *testing.T) {
	g := NewWithT(t)
	o := Options{Disabled: true, Port: -1, CertMode: CertModeRotate}
	got, err := o.resolve(func(string) ([]byte, error) { return nil, fs.ErrNotExist })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Namespace).To(BeEmpty(), "the pod's namespace is not read")
	g.Expect(got.CRDs).To(BeNil(), "no CRD is named for the CA")
}

func TestResolveReportsEveryProblem(t *testing.T) {
	o := Options{Port: -1, CertMode: CertModeRotate}
	_, err := o.resolve(func(string) ([]byte, error) { return nil, errors.New("no") })
	g := NewWithT(t)
	for _, want := range []string{"--webhook-port", "--webhook-cert-dir", "--webhook-cert-secret", "--webhook-service", "--webhook-namespace"} {
		g.Expect(err).To(MatchError(ContainSubstring(want)))
	}
}

func TestBindFlags(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--webhook-port=10443", "--webhook-cert-mode=external", "--webhook-cert-dir=/certs",
	})).To(Succeed())
	g.Expect(o.Port).To(Equal(10443))
	g.Expect(o.CertMode).To(Equal(CertModeExternal))
	g.Expect(o.CertDir).To(Equal("/certs"))
	g.Expect(o.CertSecret).To(Equal("tend-webhook-server-cert"), "an unset flag keeps its default")
	g.Expect(o.Disabled).To(BeFalse(), "the webhook serves by default")

	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--webhook-disabled"})).To(Succeed())
	g.Expect(o.Disabled).To(BeTrue())

	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--webhook-cert-mode=cert-manager"})).
		To(MatchError(ContainSubstring(`unknown certificate mode "cert-manager": use "rotate" or "external"`)))
}

func TestServiceHost(t *testing.T) {
	NewWithT(t).Expect(serviceHost("tend-webhook-service", "tend-system")).To(Equal("tend-webhook-service.tend-system.svc"))
}
