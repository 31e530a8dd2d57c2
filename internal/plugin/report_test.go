package plugin

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestLinesNaming(t *testing.T) {
	g := NewWithT(t)
	log := `{"msg":"Reconciling","namespace":"team-a","name":"demo"}
{"msg":"Reconciling","namespace":"team-ab","name":"x"}
{"msg":"Created","object":"team-a/demo-0"}
{"msg":"Other","namespace":"team-b"}
`
	g.Expect(string(linesNaming([]byte(log), "team-a"))).To(Equal(`{"msg":"Reconciling","namespace":"team-a","name":"demo"}
{"msg":"Created","object":"team-a/demo-0"}
`))
}
