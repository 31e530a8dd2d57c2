package dashboards

import (
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`tend_etcdcluster_members{namespace="$namespace", name="$cluster", state="healthy"}`, []string{"tend_etcdcluster_members"}},
		{`histogram_quantile(0.99, sum by (pod, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{job="x"}[5m])))`,
			[]string{"etcd_disk_wal_fsync_duration_seconds_bucket"}},
		{`time() - tend_etcdcluster_last_backup_timestamp_seconds{name="a"}`, []string{"tend_etcdcluster_last_backup_timestamp_seconds"}},
		{`count by (kind) (tend_resource_condition{type="Ready", status!="True"} == 1)`, []string{"tend_resource_condition"}},
		{`a / on (pod) group_left (node) b and c offset 5m unless d or bool e`, []string{"a", "b", "c", "d", "e"}},
		{`sum without (instance) (rate(x_total[1h:5m]))`, []string{"x_total"}},
		{`label_values(tend_etcdcluster_desired_members{namespace="$namespace"}, name)`, []string{"tend_etcdcluster_desired_members"}},
		{`label_values(controller_runtime_reconcile_total, job)`, []string{"controller_runtime_reconcile_total"}},
		{`{__name__="ignored"} + max(some:recorded:rule{a="b{c}"})`, []string{"some:recorded:rule"}},
	} {
		NewWithT(t).Expect(MetricNames(tc.expr)).To(Equal(tc.want), tc.expr)
	}
}

func TestFamily(t *testing.T) {
	g := NewWithT(t)
	families := Families("# HELP h a histogram\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n# TYPE c_total counter\nc_total 3\n")
	g.Expect(families).To(Equal(map[string]bool{"h": true, "c_total": true}))
	for name, want := range map[string]bool{"h_bucket": true, "h_sum": true, "h": true, "c_total": true, "c": false, "x_bucket": false} {
		_, ok := Family(name, families)
		g.Expect(ok).To(Equal(want), name)
	}
}

func configGrafana(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "config", "grafana")
}

// Each dashboard parses, has unique panel ids, queries the datasource
// variable, defines every variable it uses, and names at least one metric
// in every query.
func TestDashboardsAreWellFormed(t *testing.T) {
	boards, err := Load(configGrafana(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(boards) != 2 {
		t.Fatalf("config/grafana holds %d dashboards; want etcdcluster.json and operator.json", len(boards))
	}
	used := regexp.MustCompile(`\$\{?(\w+)\}?`)
	for file, d := range boards {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(d.UID).To(HavePrefix("tend-"))
			g.Expect(d.Title).To(HavePrefix("Tend / "))
			var defined []string
			for _, v := range d.Templating.List {
				defined = append(defined, v.Name)
			}
			g.Expect(defined).To(ContainElement("datasource"))
			ids := map[int]bool{}
			queries := 0
			for _, p := range d.Panels {
				g.Expect(ids[p.ID]).To(BeFalse(), "panel id %d twice", p.ID)
				ids[p.ID] = true
				if p.Type == "row" {
					continue
				}
				g.Expect(p.Targets).NotTo(BeEmpty(), "panel %q", p.Title)
				for _, tg := range p.Targets {
					queries++
					g.Expect(tg.Datasource["uid"]).To(Equal("${datasource}"), "panel %q", p.Title)
					g.Expect(strings.TrimSpace(tg.Expr)).NotTo(BeEmpty(), "panel %q", p.Title)
					g.Expect(MetricNames(tg.Expr)).NotTo(BeEmpty(), "panel %q: %s", p.Title, tg.Expr)
					for _, m := range used.FindAllStringSubmatch(tg.Expr, -1) {
						g.Expect(slices.Contains(defined, m[1])).To(BeTrue(), "panel %q uses $%s, which is not defined", p.Title, m[1])
					}
				}
			}
			g.Expect(queries).To(BeNumerically(">=", 10))
		})
	}
}
