package podset

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/statemetrics"
)

var replicasDesc = prometheus.NewDesc("tend_podset_replicas",
	"A PodSet's pods by state: desired (spec), current (live, not terminating) and ready (status).",
	[]string{"namespace", "name", "state"}, nil)

// Metrics exports each PodSet's replicas by state and its conditions.
var Metrics = statemetrics.Source{
	Descs: []*prometheus.Desc{replicasDesc},
	Collect: func(ctx context.Context, r client.Reader, e *statemetrics.Emitter) error {
		var list appsv1alpha1.PodSetList
		if err := r.List(ctx, &list); err != nil {
			return fmt.Errorf("listing PodSets: %w", err)
		}
		for i := range list.Items {
			ps := &list.Items[i]
			e.Gauge(replicasDesc, float64(ps.DesiredReplicas()), ps.Namespace, ps.Name, "desired")
			e.Gauge(replicasDesc, float64(ps.Status.Replicas), ps.Namespace, ps.Name, "current")
			e.Gauge(replicasDesc, float64(ps.Status.ReadyReplicas), ps.Namespace, ps.Name, "ready")
			e.Conditions("PodSet", ps, ps.Status.Conditions)
		}
		return nil
	},
}
