package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestWithInterval(t *testing.T) {
	deployed := []string{"manager", "--leader-elect", "--metrics-bind-address=:8443"}
	for _, tc := range []struct {
		name     string
		args     []string
		interval string
		want     []string
	}{
		{"added", deployed, "10s", append(append([]string{}, deployed...), "--etcdcluster-member-change-interval=10s")},
		{"nothing to remove", deployed, "", deployed},
		{"replaced", append(append([]string{}, deployed...), "--etcdcluster-member-change-interval=3s"), "10s",
			append(append([]string{}, deployed...), "--etcdcluster-member-change-interval=10s")},
		{"removed, with its value apart", []string{"manager", "--etcdcluster-member-change-interval", "3s", "--leader-elect"}, "",
			[]string{"manager", "--leader-elect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := append([]string{}, tc.args...)
			g.Expect(withInterval(tc.args, tc.interval)).To(Equal(tc.want))
			g.Expect(tc.args).To(Equal(before), "the args given are left as they were")
		})
	}
}

func TestLeaderElect(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"manager", "--leader-elect"}, true},
		{[]string{"manager", "--leader-elect=true"}, true},
		{[]string{"manager", "--leader-elect=false"}, false},
		{[]string{"manager", "--leader-elect", "--leader-elect=false"}, false},
		{[]string{"manager"}, false},
	} {
		NewWithT(t).Expect(leaderElect(tc.args)).To(Equal(tc.want), "%q", tc.args)
	}
}

func TestElectionTimeout(t *testing.T) {
	sts := func(env []corev1.EnvVar, args ...string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Env: env, Args: args}}
		return s
	}
	g := NewWithT(t)
	g.Expect(electionTimeout(sts(nil))).To(Equal(time.Second), "etcd's default")
	g.Expect(electionTimeout(sts([]corev1.EnvVar{{Name: "ETCD_ELECTION_TIMEOUT", Value: "2500"}}))).To(Equal(2500 * time.Millisecond))
	g.Expect(electionTimeout(sts(nil, "--election-timeout=500"))).To(Equal(500 * time.Millisecond))
	g.Expect(electionTimeout(sts([]corev1.EnvVar{{Name: "ETCD_ELECTION_TIMEOUT", Value: "x"}}))).To(Equal(time.Second), "unreadable: the default")
}
