//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pods find a Service by its DNS name and reach the pod behind it through
// kube-proxy; they reach moto_server on the node address; and cluster DNS
// refuses names outside the cluster, as it forwards nothing upstream.
func TestPodNetwork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	token := fmt.Sprintf("served-by-web-%d", rand.Int64())

	web := cluster.BusyboxPod(ns, "web", `mkdir -p /www && echo "$TOKEN" > /www/token && exec httpd -f -p 8080 -h /www`)
	web.Labels = map[string]string{"app": "web"}
	web.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", Value: token}}
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := cluster.Client.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	cluster.WaitForPodReady(t, ns, "web")

	moto, err := url.Parse(cluster.Settings.MotoURL)
	if err != nil {
		t.Fatal(err)
	}
	// moto is asked a page that reads none of its state: its state dump
	// (/moto-api/data.json) fails while other tests' S3 objects are
	// being deleted with their bucket. kube-proxy programs a new Service
	// a moment after the API has it, and
	// nothing in the API says when: the client tries for up to a minute.
	script := fmt.Sprintf(`
get() { printf 'GET %%s HTTP/1.0\r\nHost: %%s\r\n\r\n' "$3" "$1" | nc -w 5 "$1" "$2"; }
for i in $(seq 60); do
  if out=$(get web.%s.svc.cluster.local 80 /token); then break; fi
  sleep 1
done
echo "service: $out"
echo "moto: $(get %s %s /moto-api/ | head -n 1)"
echo "outside: $(nslookup example.com 2>&1)"
`, ns, moto.Hostname(), moto.Port())
	client := cluster.BusyboxJob(ns, "client", script)
	if err := cluster.Client.Create(ctx, client); err != nil {
		t.Fatal(err)
	}
	cluster.WaitForJobComplete(t, ns, "client")
	pods := cluster.Kubectl(t, "get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=client", "-o", "jsonpath={.items[0].metadata.name}")
	logs := cluster.PodLogs(t, ns, pods, "client")

	for _, want := range []string{
		token,                             // the Service's pod answered, by name
		"moto: HTTP/1.1 200",              // moto_server answered on the node address
		"can't find example.com: REFUSED", // no upstream DNS
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the client's output lacks %q:\n%s", want, logs)
		}
	}
}
