package etcdcluster

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
)

// TestIssuedCertificatesAreOneEvent: a new cluster's three certificates
// are announced by one Event that names every Secret. Three Events that
// differ only in their note would be one series to the events library,
// which shows the first note alone and writes the series again later.
func TestIssuedCertificatesAreOneEvent(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "kv", UID: "u1"}}
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(c).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: rec, Clock: clocktesting.NewFakeClock(t0)}
	if err := r.issueCertificates(context.Background(), &scope{cluster: c, now: t0}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	if len(got) != 1 || !strings.Contains(got[0], "CertificatesIssued") ||
		!strings.Contains(got[0], "Issued certificates in Secrets kv-server-tls, kv-peer-tls and kv-client-tls") {
		t.Errorf("Events: %q; want one CertificatesIssued naming the three Secrets", got)
	}
	// A second pass issues nothing, and says nothing.
	if err := r.issueCertificates(context.Background(), &scope{cluster: c, now: t0}); err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 0 {
		t.Errorf("a pass that issued nothing sent %q", <-rec.Events)
	}
}

func TestInSecrets(t *testing.T) {
	if got := inSecrets("certificate", []string{"a"}); got != "a certificate in Secret a" {
		t.Errorf("one: %q", got)
	}
	if got := inSecrets("certificate", []string{"a", "b"}); got != "certificates in Secrets a and b" {
		t.Errorf("two: %q", got)
	}
}
