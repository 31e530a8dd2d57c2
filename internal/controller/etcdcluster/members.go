package etcdcluster

import (
	"context"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/etcdnames"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// annotationMemberID on a member's PVC is the ID of the member whose data
// it holds, set once that member has been seen healthy. A volume whose
// member has left etcd holds data that must never start again.
const annotationMemberID = "etcd.tend.dev/member-id"

// runningImage is the etcd image of the members' current template.
func runningImage(sts *appsv1.StatefulSet) string {
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == "etcd" {
			return ctr.Image
		}
	}
	return ""
}

// enableAuth turns on etcd's authentication with the root user, before
// the init Job exists (it checks the root login); afterwards it is done. A
// cluster restored from a backup has the old cluster's auth: it is made to
// match the spec and the new root Secret.
func (r *Reconciler) enableAuth(ctx context.Context, s *scope, cli Members) error {
	if s.obs.job != jobNone {
		return nil
	}
	c := s.cluster
	if err := applyAuth(ctx, c, cli, s.rootPassword, restoring(c)); err != nil || !c.Spec.Auth.Enabled {
		return err
	}
	r.event(c, corev1.EventTypeNormal, "AuthEnabled", "EnableAuth", "Enabled authentication; the root user's password is in Secret %s", etcdnames.RootSecretName(c))
	return nil
}

// applyAuth makes the members' authentication what c's spec asks, with
// rootPassword for root. Restored data brings the old cluster's auth and
// root password: with restored set, auth is turned off when the spec has
// none, and the password is set anew.
func applyAuth(ctx context.Context, c *etcdv1alpha1.EtcdCluster, cli Members, rootPassword string, restored bool) error {
	if !c.Spec.Auth.Enabled {
		if !restored {
			return nil
		}
		if err := cli.DisableAuth(ctx); err != nil {
			return fmt.Errorf("disabling the restored data's authentication: %w", err)
		}
		return nil
	}
	if err := cli.EnableAuth(ctx, rootPassword); err != nil {
		return fmt.Errorf("enabling authentication: %w", err)
	}
	if restored {
		if err := cli.SetRootPassword(ctx, rootPassword); err != nil {
			return fmt.Errorf("setting the restored data's root password: %w", err)
		}
	}
	return nil
}

// viewsOf places the members etcd reports in the StatefulSet and times
// their ill health from the last status (for a learner that has not
// started, the time since Tend first saw it).
func viewsOf(c *etcdv1alpha1.EtcdCluster, statuses []etcd.MemberStatus, now time.Time) []memberView {
	views := make([]memberView, 0, len(statuses))
	for _, st := range statuses {
		v := memberView{MemberStatus: st, Name: st.Name, Ordinal: -1}
		if v.Name == "" && len(st.PeerURLs) > 0 {
			v.Name, _ = memberNameOfPeerURL(c, st.PeerURLs[0])
		}
		if i, ok := memberOrdinal(c, v.Name); ok {
			v.Ordinal = i
		}
		if !st.Healthy {
			v.UnhealthySince = unhealthySince(c, v.Name, st.ID.String(), now)
		}
		views = append(views, v)
	}
	return views
}

// unhealthySince is when the last status first saw the member unhealthy,
// or now.
func unhealthySince(c *etcdv1alpha1.EtcdCluster, name, id string, now time.Time) time.Time {
	for _, m := range c.Status.Members {
		if m.Name == name && m.ID == id && m.UnhealthySince != nil {
			return m.UnhealthySince.Time
		}
	}
	return now
}

// healthRequeue is when the next health check is due: soon while a member
// is unhealthy, at the moment its replacement would be due, at the idle
// interval while every member is idle (see idle), else the steady one.
func healthRequeue(c *etcdv1alpha1.EtcdCluster, views []memberView, now time.Time) time.Duration {
	if idle(c, views) {
		return requeueIdle
	}
	policy := replacementOf(c)
	next := requeueSteady
	for _, v := range views {
		if v.UnhealthySince.IsZero() {
			continue
		}
		next = min(next, requeueUnreachable)
		if due := v.UnhealthySince.Add(policy.after).Sub(now); policy.auto && due > 0 {
			next = min(next, due)
		}
	}
	return next
}

// idle tells whether the members need no closer look than requeueIdle:
// each votes, answered healthy with no alarm or error to report, and
// keeps its database file below nearQuota of the quota. Whatever the
// member pods' probes see starts a pass at once through their watch; the
// health check is for what they do not, of which a database that
// approaches its quota (NOSPACE stops every write) is the one that can
// come quickly, so those clusters keep the steady interval.
func idle(c *etcdv1alpha1.EtcdCluster, views []memberView) bool {
	if len(views) == 0 {
		return false
	}
	limit := int64(float64(quotaOf(c)) * nearQuota)
	for _, v := range views {
		if !v.Healthy || v.IsLearner || len(v.Errors) > 0 || v.DataLost || v.DBSize >= limit {
			return false
		}
	}
	return true
}

func replaceView(views []memberView, id etcd.MemberID, change func(*memberView)) []memberView {
	for i := range views {
		if views[i].ID == id {
			change(&views[i])
		}
	}
	return views
}

func removeView(views []memberView, id etcd.MemberID) []memberView {
	out := views[:0:0]
	for _, v := range views {
		if v.ID != id {
			out = append(out, v)
		}
	}
	return out
}
