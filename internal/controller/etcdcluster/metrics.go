package etcdcluster

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/statemetrics"
)

var (
	membersDesc = prometheus.NewDesc("tend_etcdcluster_members",
		"An EtcdCluster's members by state, as its status last saw them: healthy and unhealthy voters, and learners.",
		[]string{"namespace", "name", "state"}, nil)
	quorumMarginDesc = prometheus.NewDesc("tend_etcdcluster_quorum_margin",
		"Healthy voting members above the quorum: how many more may fail before etcd stops serving writes (negative: the quorum is lost).",
		[]string{"namespace", "name"}, nil)
	desiredDesc = prometheus.NewDesc("tend_etcdcluster_desired_members",
		"The members an EtcdCluster's spec asks for.",
		[]string{"namespace", "name"}, nil)
	rollDesc = prometheus.NewDesc("tend_etcdcluster_roll_members",
		"While a roll runs, its members by state: updated (restarted on the new revision) and pending.",
		[]string{"namespace", "name", "state"}, nil)
	certificateDesc = prometheus.NewDesc("tend_etcdcluster_certificate_expiry_timestamp_seconds",
		"When the certificate in each of an EtcdCluster's TLS Secrets expires, as its status.certificates says.",
		[]string{"namespace", "name", "secret"}, nil)
	archiveVerifiedDesc = prometheus.NewDesc("tend_etcdcluster_archive_verification_timestamp_seconds",
		"When the last verification of an EtcdCluster's continuous archive ended, by its result (Matches, Mismatch, VerificationFailed).",
		[]string{"namespace", "name", "result"}, nil)
	archiveLastRevisionDesc = prometheus.NewDesc("tend_etcdcluster_archive_last_revision",
		"The newest revision an EtcdCluster's continuous archive has stored, as its status last saw it.",
		[]string{"namespace", "name"}, nil)
)

// Metrics exports each EtcdCluster's members, quorum margin, roll
// progress, certificate expiries, archive and conditions, and each
// EtcdRestore's conditions.
var Metrics = statemetrics.Source{
	Descs: []*prometheus.Desc{membersDesc, quorumMarginDesc, desiredDesc, rollDesc, certificateDesc, archiveVerifiedDesc, archiveLastRevisionDesc},
	Collect: func(ctx context.Context, r client.Reader, e *statemetrics.Emitter) error {
		var clusters etcdv1alpha1.EtcdClusterList
		if err := r.List(ctx, &clusters); err != nil {
			return fmt.Errorf("listing EtcdClusters: %w", err)
		}
		for i := range clusters.Items {
			c := &clusters.Items[i]
			ns, name := c.Namespace, c.Name
			e.Gauge(desiredDesc, float64(replicas(c)), ns, name)
			if len(c.Status.Members) > 0 {
				var healthy, unhealthy, learners int
				for _, m := range c.Status.Members {
					switch {
					case m.Learner:
						learners++
					case m.Healthy:
						healthy++
					default:
						unhealthy++
					}
				}
				e.Gauge(membersDesc, float64(healthy), ns, name, "healthy")
				e.Gauge(membersDesc, float64(unhealthy), ns, name, "unhealthy")
				e.Gauge(membersDesc, float64(learners), ns, name, "learner")
				e.Gauge(quorumMarginDesc, float64(healthy-etcd.Quorum(healthy+unhealthy)), ns, name)
			}
			if u := c.Status.Update; u != nil {
				e.Gauge(rollDesc, float64(len(u.UpdatedMembers)), ns, name, "updated")
				e.Gauge(rollDesc, float64(len(u.PendingMembers)), ns, name, "pending")
			}
			for _, cert := range c.Status.Certificates {
				if !cert.NotAfter.IsZero() {
					e.Gauge(certificateDesc, float64(cert.NotAfter.Unix()), ns, name, cert.Secret)
				}
			}
			if a := c.Status.Archive; a != nil {
				e.Gauge(archiveLastRevisionDesc, float64(a.LastRevision), ns, name)
				if v := a.Verification; v != nil && v.Time != nil {
					e.Gauge(archiveVerifiedDesc, float64(v.Time.Unix()), ns, name, v.Result)
				}
			}
			e.Conditions("EtcdCluster", c, c.Status.Conditions)
		}
		var restores etcdv1alpha1.EtcdRestoreList
		if err := r.List(ctx, &restores); err != nil {
			return fmt.Errorf("listing EtcdRestores: %w", err)
		}
		for i := range restores.Items {
			e.Conditions("EtcdRestore", &restores.Items[i], restores.Items[i].Status.Conditions)
		}
		return nil
	},
}
