package plugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/podspec"
)

func TestRedactSecret(t *testing.T) {
	g := NewWithT(t)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`, "keep": "me"}},
		Data:       map[string][]byte{"password": []byte("secret")},
		StringData: map[string]string{"token": "abcd"},
	}
	RedactSecret(s)
	g.Expect(s.Data).To(BeNil())
	g.Expect(s.StringData).To(Equal(map[string]string{"password": "<redacted: 6 bytes>", "token": "<redacted: 4 bytes>"}))
	g.Expect(s.Annotations).To(Equal(map[string]string{corev1.LastAppliedConfigAnnotation: "<redacted>", "keep": "me"}))
}

func TestLinesInNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       bool
	}{
		{"a reconcile of team-a, JSON", `{"msg":"Reconciling","EtcdCluster":{"name":"demo","namespace":"team-a"},"namespace":"team-a","name":"demo"}`, true},
		{"a reconcile of team-a, console", "2026-11-25T03:00:00Z\tINFO\tReconciling\t" + `{"EtcdCluster": {"name":"demo","namespace":"team-a"}, "namespace": "team-a", "name": "demo"}`, true},
		{"no namespace field, an object of team-a", `{"msg":"Listing EtcdClusters by TLS Secret","secret":{"name":"s","namespace":"team-a"}}`, true},
		{"no namespace field, a NamespacedName of team-a, console", "2026-11-25T03:00:00Z\tINFO\tStarted\t" + `{"key": {"name":"x","namespace":"team-a"}}`, true},
		{"a longer namespace", `{"msg":"Reconciling","namespace":"team-ab","name":"x"}`, false},
		{"another namespace, a name that is team-a", `{"msg":"Reconciling","namespace":"team-b","name":"team-a"}`, false},
		{"another namespace, team-a in the message", `{"msg":"Copying from team-a/demo","namespace":"team-b"}`, false},
		{"another namespace, console, team-a in the message", "2026-11-25T03:00:00Z\tINFO\tDeleting \"team-a\"\t" + `{"namespace": "team-ab", "name": "team-a"}`, false},
		{"another namespace's reconcile naming an object of team-a", `{"msg":"Reading","namespace":"team-b","pod":{"name":"p","namespace":"team-a"}}`, false},
		{"no namespace field, an object of another namespace named team-a", `{"msg":"Listing","secret":{"name":"team-a","namespace":"team-b"}}`, false},
		{"team-a/ in a string field", `{"msg":"Created","object":"team-a/demo-0"}`, false},
		{"klog's text", `I1125 03:00:00.000000       1 leaderelection.go:257] attempting to acquire leader lease team-a/lease`, false},
		{"not JSON", `{"msg":"cut short","namespace":"team-a"`, false},
		{"a stack trace", "\t/work/team-a/main.go:19", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := ""
			if tc.want {
				want = tc.line + "\n"
			}
			g.Expect(string(linesInNamespace([]byte(tc.line+"\n"), "team-a"))).To(Equal(want))
		})
	}
}

// untar reads a report's archive into its files' contents by name.
func untar(g Gomega, archive []byte) map[string]string {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		g.Expect(err).NotTo(HaveOccurred())
		data, err := io.ReadAll(tr)
		g.Expect(err).NotTo(HaveOccurred())
		files[hdr.Name] = string(data)
	}
}

// leakyReport is what a report of the EtcdCluster team-a/demo reads when
// its objects and the manager's log hold each kind of value that the
// archive must not: the values name themselves "...-s3cr3t".
func leakyReport() *reportData {
	ownedBy := func(uid types.UID, kind string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "etcd.tend.dev/v1alpha1", Kind: kind, Name: "demo", UID: uid, Controller: ptr.To(controller)}}
	}
	meta := func(name string, owner []metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(name + "-uid"), OwnerReferences: owner}
	}
	cluster := ownedBy("c-uid", "EtcdCluster", true)
	env := func(value string) []corev1.EnvVar {
		return []corev1.EnvVar{
			{Name: "ETCD_PASSWORD", Value: value},
			{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "demo-creds"}, Key: "password"}}},
		}
	}
	podSpec := func(prefix string) corev1.PodSpec {
		return corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Env: env(prefix + "-init-env-s3cr3t")}},
			Containers:     []corev1.Container{{Name: "etcd", Env: env(prefix + "-env-s3cr3t")}},
		}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: meta("demo", cluster),
		Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: podSpec("sts")}}}
	pod := &corev1.Pod{ObjectMeta: meta("demo-0", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "demo", UID: "demo-uid", Controller: ptr.To(true)}}),
		Spec: podSpec("pod")}
	job := &batchv1.Job{ObjectMeta: meta("demo-backup", cluster),
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec("job")}}}
	// The report lists no Deployments today; one is here to show that the
	// redaction does not depend on the kind.
	deploy := &appsv1.Deployment{ObjectMeta: meta("demo-proxy", cluster),
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: podSpec("deploy")}}}
	// Tend's connection ConfigMap, with a key and a binary key that Tend
	// does not write (it adopted a ConfigMap of that name, say).
	connection := &corev1.ConfigMap{ObjectMeta: meta("demo-connection", cluster),
		Data: map[string]string{
			podspec.ConnectionEndpoint:  "https://demo-client.team-a.svc:2379",
			podspec.ConnectionEndpoints: "https://demo-0.demo.team-a.svc:2379",
			"password":                  "adopted-s3cr3t",
		},
		BinaryData: map[string][]byte{"blob": []byte("adopted-binary-s3cr3t")},
	}
	// A ConfigMap the cluster owns but Tend did not make, applied with
	// kubectl, and one that the cluster controls but whose name is not the
	// connection's.
	settings := &corev1.ConfigMap{ObjectMeta: meta("demo-settings", ownedBy("c-uid", "EtcdCluster", false)),
		Data:       map[string]string{"password": "cm-s3cr3t"},
		BinaryData: map[string][]byte{"key": []byte("cm-binary-s3cr3t")},
	}
	settings.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","kind":"ConfigMap","data":{"password":"cm-s3cr3t"}}`}
	other := &corev1.ConfigMap{ObjectMeta: meta("demo-connection-extra", cluster),
		Data: map[string]string{podspec.ConnectionEndpoint: "other-cm-s3cr3t"}}
	secret := &corev1.Secret{ObjectMeta: meta("demo-creds", cluster), Data: map[string][]byte{"password": []byte("secret-s3cr3t")}}

	root := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", UID: "c-uid", Annotations: map[string]string{
		// What kubectl apply copies there: here a Secret, to stand for
		// any object with a secret value.
		corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret","stringData":{"password":"applied-s3cr3t"}}]}`,
	}}}
	event := corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo.1", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"message":"event-applied-s3cr3t"}`}},
		InvolvedObject: corev1.ObjectReference{Kind: "EtcdCluster", Name: "demo", UID: "c-uid"}, Reason: "Created", Message: "Created the StatefulSet demo"}

	// The manager's log, JSON and console lines, from team-a, from team-ab
	// (whose name team-a is a prefix of) and from team-b; the others'
	// lines name team-a in a message or a field.
	log := strings.Join([]string{
		`{"level":"info","ts":"2026-11-25T03:00:00Z","msg":"Reconciling","controller":"etcdcluster","EtcdCluster":{"name":"demo","namespace":"team-a"},"namespace":"team-a","name":"demo","reconcileID":"a-1"}`,
		`{"level":"info","ts":"2026-11-25T03:00:00Z","msg":"Reconciling","controller":"etcdcluster","EtcdCluster":{"name":"team-a","namespace":"team-ab"},"namespace":"team-ab","name":"team-a","reconcileID":"log-s3cr3t-1"}`,
		`{"level":"info","ts":"2026-11-25T03:00:00Z","msg":"Copying the backup from team-a/demo","namespace":"team-b","name":"x","reconcileID":"log-s3cr3t-2"}`,
		`{"level":"error","ts":"2026-11-25T03:00:00Z","msg":"Listing EtcdClusters by TLS Secret","secret":{"name":"demo-server-tls","namespace":"team-a"},"error":"boom"}`,
		`{"level":"error","ts":"2026-11-25T03:00:00Z","msg":"Listing EtcdClusters by TLS Secret","secret":{"name":"team-a","namespace":"team-b"},"error":"log-s3cr3t-3"}`,
		"2026-11-25T03:00:00Z\tINFO\tReconciling\t" + `{"controller": "etcdcluster", "EtcdCluster": {"name":"demo","namespace":"team-a"}, "namespace": "team-a", "name": "demo", "reconcileID": "a-2"}`,
		"2026-11-25T03:00:00Z\tINFO\tDeleting \"team-a\"\t" + `{"controller": "etcdcluster", "namespace": "team-ab", "name": "team-a", "reconcileID": "log-s3cr3t-4"}`,
		`I1125 03:00:00.000000       1 leaderelection.go:257] attempting to acquire leader lease team-a/log-s3cr3t-5...`,
	}, "\n") + "\n"

	return &reportData{
		root:        root,
		objects:     []client.Object{sts, pod, job, deploy, connection, settings, other, secret},
		events:      &corev1.EventList{Items: []corev1.Event{event}},
		logs:        []logFile{{name: "logs/demo-0/etcd.log", data: []byte("etcd started\n")}},
		managerLogs: []logFile{{name: "logs/manager/tend-manager-0/manager.log", data: []byte(log)}},
	}
}

// leakySecrets are the values of leakyReport that must not reach the
// archive.
var leakySecrets = []string{
	"sts-env-s3cr3t", "sts-init-env-s3cr3t", "pod-env-s3cr3t", "pod-init-env-s3cr3t",
	"job-env-s3cr3t", "job-init-env-s3cr3t", "deploy-env-s3cr3t", "deploy-init-env-s3cr3t",
	"adopted-s3cr3t", "adopted-binary-s3cr3t", "cm-s3cr3t", "cm-binary-s3cr3t", "other-cm-s3cr3t",
	"secret-s3cr3t", "applied-s3cr3t", "event-applied-s3cr3t",
	"log-s3cr3t-1", "log-s3cr3t-2", "log-s3cr3t-3", "log-s3cr3t-4", "log-s3cr3t-5",
}

func TestReportArchiveRedacts(t *testing.T) {
	g := NewWithT(t)
	d := leakyReport()
	var archive bytes.Buffer
	g.Expect(writeArchive(&archive, d, false, t0)).To(Succeed())
	files := untar(g, archive.Bytes())
	g.Expect(files).To(HaveKey("report/objects/StatefulSet-demo.yaml"))
	for name, data := range files {
		g.Expect(data).NotTo(ContainSubstring("s3cr3t"), "%s holds a secret value", name)
		for _, s := range leakySecrets {
			g.Expect(data).NotTo(ContainSubstring(s), "%s holds %q", name, s)
			g.Expect(data).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(s))), "%s holds %q in base64", name, s)
		}
	}

	sts := files["report/objects/StatefulSet-demo.yaml"]
	g.Expect(sts).To(MatchRegexp(`- name: ETCD_PASSWORD\s+value: '<redacted: 14 bytes>'`), "an env value is redacted, its name kept")
	g.Expect(sts).To(MatchRegexp(`secretKeyRef:\s+key: password\s+name: demo-creds`), "a reference is kept")
	g.Expect(files["report/objects/EtcdCluster-demo.yaml"]).To(ContainSubstring("kubectl.kubernetes.io/last-applied-configuration: <redacted>"))
	g.Expect(files["report/objects/ConfigMap-demo-settings.yaml"]).To(ContainSubstring("password: '<redacted: 9 bytes>'"), "a ConfigMap's keys are kept")
	g.Expect(files["report/objects/ConfigMap-demo-settings.yaml"]).To(ContainSubstring("key: '<redacted: 16 bytes>'"), "binaryData's keys too")
	connection := files["report/objects/ConfigMap-demo-connection.yaml"]
	g.Expect(connection).To(ContainSubstring("endpoint: https://demo-client.team-a.svc:2379"), "the cluster's connection ConfigMap stays readable")
	g.Expect(connection).To(ContainSubstring("password: '<redacted: 14 bytes>'"), "but only the keys that Tend writes")
	g.Expect(files["report/objects/Secret-demo-creds.yaml"]).To(ContainSubstring("password: '<redacted: 13 bytes>'"))
	g.Expect(files["report/logs/manager/tend-manager-0/manager.log"]).To(Equal(`{"level":"info","ts":"2026-11-25T03:00:00Z","msg":"Reconciling","controller":"etcdcluster","EtcdCluster":{"name":"demo","namespace":"team-a"},"namespace":"team-a","name":"demo","reconcileID":"a-1"}
{"level":"error","ts":"2026-11-25T03:00:00Z","msg":"Listing EtcdClusters by TLS Secret","secret":{"name":"demo-server-tls","namespace":"team-a"},"error":"boom"}
`+"2026-11-25T03:00:00Z\tINFO\tReconciling\t"+`{"controller": "etcdcluster", "EtcdCluster": {"name":"demo","namespace":"team-a"}, "namespace": "team-a", "name": "demo", "reconcileID": "a-2"}
`), "team-a's lines, by their namespace field or the namespace of the object they name")
	g.Expect(files["report/logs/demo-0/etcd.log"]).To(Equal("etcd started\n"))

	// A ConfigMap of the connection's name that the cluster owns but that
	// an older cluster of the same name controls is not this cluster's
	// connection.
	d = leakyReport()
	for _, obj := range d.objects {
		if obj.GetName() == "demo-connection" {
			obj.SetOwnerReferences([]metav1.OwnerReference{
				{APIVersion: "etcd.tend.dev/v1alpha1", Kind: "EtcdCluster", Name: "demo", UID: "older-uid", Controller: ptr.To(true)},
				{APIVersion: "etcd.tend.dev/v1alpha1", Kind: "EtcdCluster", Name: "demo", UID: "c-uid"},
			})
		}
	}
	archive.Reset()
	g.Expect(writeArchive(&archive, d, false, t0)).To(Succeed())
	g.Expect(untar(g, archive.Bytes())["report/objects/ConfigMap-demo-connection.yaml"]).To(ContainSubstring("endpoint: '<redacted: 35 bytes>'"))
}

func TestReportArchiveIncludeSecrets(t *testing.T) {
	g := NewWithT(t)
	var archive bytes.Buffer
	g.Expect(writeArchive(&archive, leakyReport(), true, t0)).To(Succeed())
	files := untar(g, archive.Bytes())
	g.Expect(files["report/objects/StatefulSet-demo.yaml"]).To(ContainSubstring("value: sts-env-s3cr3t"))
	g.Expect(files["report/objects/ConfigMap-demo-settings.yaml"]).To(ContainSubstring("password: cm-s3cr3t"))
	g.Expect(files["report/objects/EtcdCluster-demo.yaml"]).To(ContainSubstring("applied-s3cr3t"))
	g.Expect(files["report/logs/manager/tend-manager-0/manager.log"]).NotTo(ContainSubstring("log-s3cr3t"), "other namespaces' lines stay out whatever the flag")
}
