package manager

import (
	"flag"
	"testing"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/tend-dev/tend/internal/webhook"
)

func TestSelectControllers(t *testing.T) {
	noop := func(ctrl.Manager) error { return nil }
	all := []Controller{{Name: "podset", Setup: noop}, {Name: "queue", Setup: noop}, {Name: "etcdcluster", Setup: noop}}
	tests := []struct {
		name    string
		list    []string
		want    []string
		wantErr string
	}{
		{name: "star runs all", list: []string{"*"}, want: []string{"podset", "queue", "etcdcluster"}},
		{name: "star minus one", list: []string{"*", "-queue"}, want: []string{"podset", "etcdcluster"}},
		{name: "one by name", list: []string{"queue"}, want: []string{"queue"}},
		{name: "order follows the registry", list: []string{"etcdcluster", "podset"}, want: []string{"podset", "etcdcluster"}},
		{name: "disable wins over enable", list: []string{"queue", "-queue"}, want: nil},
		{name: "empty runs none", list: nil, want: nil},
		{name: "unknown name", list: []string{"*", "podsets"}, wantErr: `unknown controller "podsets" in --controllers; known controllers: etcdcluster, podset, queue`},
		{name: "unknown disabled name", list: []string{"-nope"}, wantErr: `unknown controller "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := SelectControllers(all, tt.list)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var order []string
			for _, c := range got {
				order = append(order, c.Name)
			}
			g.Expect(order).To(Equal(tt.want))
		})
	}
}

func TestBindFlags(t *testing.T) {
	g := NewWithT(t)
	o := DefaultOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse([]string{
		"--controllers= podset , -queue,",
		"--leader-elect",
		"--metrics-bind-address=0",
		"--pprof-bind-address=127.0.0.1:6060",
		"--kube-api-qps=20", "--kube-api-burst=30",
		"--webhook-port=10443", "--webhook-cert-mode=external",
		"--watch-namespaces=team-a, team-b",
	})).To(Succeed())
	g.Expect(o.WatchNamespaces).To(Equal([]string{"team-a", "team-b"}))
	g.Expect(o.Controllers).To(Equal([]string{"podset", "-queue"}))
	g.Expect(o.LeaderElect).To(BeTrue())
	g.Expect(o.MetricsAddr).To(Equal("0"))
	g.Expect(o.PprofAddr).To(Equal("127.0.0.1:6060"))
	g.Expect(o.QPS).To(Equal(20.0))
	g.Expect(o.Burst).To(Equal(30))
	g.Expect(o.Webhook.Port).To(Equal(10443))
	g.Expect(o.Webhook.CertMode).To(Equal(webhook.CertModeExternal))
	g.Expect(o.ProbeAddr).To(Equal(":8081"), "an unset flag keeps its default")
	g.Expect(o.Webhook.CertSecret).To(Equal("tend-webhook-server-cert"), "an unset flag keeps its default")
}
