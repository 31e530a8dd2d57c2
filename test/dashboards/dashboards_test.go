package dashboards

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    []string
		wantErr bool
	}{
		{expr: `up`, want: []string{"up"}},
		{expr: `tend_etcdcluster_members{namespace="$namespace", name="$cluster", state="healthy"}`,
			want: []string{"tend_etcdcluster_members"}},
		{expr: `histogram_quantile(0.99, sum by (pod, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{job="x"}[5m])))`,
			want: []string{"etcd_disk_wal_fsync_duration_seconds_bucket"}},
		{expr: `rate(x_total{a=~"$many"}[$__rate_interval]) + rate(y_total[${__interval}])`, want: []string{"x_total", "y_total"}},
		{expr: `time() - tend_etcdcluster_last_backup_timestamp_seconds{name="a"}`,
			want: []string{"tend_etcdcluster_last_backup_timestamp_seconds"}},
		{expr: `count by (kind) (tend_resource_condition{type="Ready", status!="True"} == 1)`, want: []string{"tend_resource_condition"}},
		{expr: `a / on (pod) group_left (node) b and c offset 1h30m unless d or e > bool 1`, want: []string{"a", "b", "c", "d", "e"}},
		{expr: `a * ignoring () group_right b atan2 c > -Inf`, want: []string{"a", "b", "c"}},
		{expr: `sum(rate(x_total[5m])) by (le) + sum without(a,b) (y) * 0x1F / 1e-3 + .5`, want: []string{"x_total", "y"}},
		{expr: `sum without (instance) (rate(x_total[1h:5m])) + max(x_total @ start())`, want: []string{"x_total"}},
		{expr: `{__name__="by_name", job="j"} + max(some:recorded:rule{a="b{c}"}) + {__name__=~"re.*"}`,
			want: []string{"by_name", "some:recorded:rule"}},
		{expr: "label_replace(m, \"dst\", \"$1\", \"src\", \"(.*)\") + n{a=`raw)`, b='q\\'s'}", want: []string{"m", "n"}},
		{expr: `topk($n, x_total) + count_values("v", y)`, want: []string{"x_total", "y"}},
		{expr: "sum by (kind)\n  (x)\n> 0 or vector(0)", want: []string{"x"}},
		{expr: `label_values(tend_etcdcluster_desired_members{namespace="$namespace", x="a,b"}, name)`,
			want: []string{"tend_etcdcluster_desired_members"}},
		{expr: `label_values(controller_runtime_reconcile_total, job)`, want: []string{"controller_runtime_reconcile_total"}},
		{expr: `query_result(topk(5, sum by (name) (workqueue_depth)))`, want: []string{"workqueue_depth"}},
		{expr: `vector(1)`, want: nil},
		{expr: `sum(rate(x_total[5m])`, wantErr: true},  // an unclosed parenthesis
		{expr: `sum(rate(x_total[5m)))`, wantErr: true}, // a ] missing
		{expr: `x{a="1}`, wantErr: true},                // an unterminated string
		{expr: `x offset y`, wantErr: true},             // not a duration
		{expr: `x # a comment`, wantErr: true},          // not used here
		{expr: `label_values(job)`, wantErr: true},      // names no metric
	} {
		g := NewWithT(t)
		got, err := MetricNames(tc.expr)
		if tc.wantErr {
			g.Expect(err).To(HaveOccurred(), tc.expr)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), tc.expr)
		g.Expect(got).To(Equal(tc.want), tc.expr)
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

var variableUse = regexp.MustCompile(`\$\{?(\w+)`)

// usedVariables are the template variables a query uses, without Grafana's
// built-in ones ($__rate_interval and the like).
func usedVariables(query string) []string {
	var out []string
	for _, m := range variableUse.FindAllStringSubmatch(query, -1) {
		if !strings.HasPrefix(m[1], "__") {
			out = append(out, m[1])
		}
	}
	return out
}

// Each dashboard parses, has unique panel ids, takes its data source from
// the datasource variable, defines every variable before it is used, and
// every query tokenizes and names at least one metric.
func TestDashboardsAreWellFormed(t *testing.T) {
	boards, err := Load(configGrafana(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(boards) != 2 {
		t.Fatalf("config/grafana holds %d dashboards; want etcdcluster.json and operator.json", len(boards))
	}
	const fromVariable = "${datasource}"
	for file, d := range boards {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(d.UID).To(HavePrefix("tend-"))
			g.Expect(d.Title).To(HavePrefix("Tend / "))
			g.Expect(d.SchemaVersion).To(BeNumerically(">=", 36))

			var defined []string
			for i, v := range d.Templating.List {
				if i == 0 {
					g.Expect(v.Name).To(Equal("datasource"), "the first variable")
					g.Expect(v.Type).To(Equal("datasource"))
					g.Expect(v.Query).To(Equal("prometheus"))
				}
				if q := v.VariableQuery(); q != "" {
					g.Expect(v.Datasource["uid"]).To(Equal(fromVariable), "variable %s", v.Name)
					names, err := MetricNames(q)
					g.Expect(err).NotTo(HaveOccurred(), "variable %s", v.Name)
					g.Expect(names).NotTo(BeEmpty(), "variable %s: %s", v.Name, q)
					for _, u := range usedVariables(q) {
						g.Expect(defined).To(ContainElement(u), "variable %s uses $%s, which is not defined before it", v.Name, u)
					}
				}
				g.Expect(defined).NotTo(ContainElement(v.Name), "variable %s twice", v.Name)
				defined = append(defined, v.Name)
			}

			ids := map[int]bool{}
			queries := 0
			for _, p := range d.AllPanels() {
				g.Expect(p.ID).To(BeNumerically(">", 0), "panel %q has no id", p.Title)
				g.Expect(ids[p.ID]).To(BeFalse(), "panel id %d twice", p.ID)
				ids[p.ID] = true
				if p.Type == "row" {
					continue
				}
				g.Expect(p.Datasource["uid"]).To(Equal(fromVariable), "panel %q", p.Title)
				g.Expect(p.Targets).NotTo(BeEmpty(), "panel %q", p.Title)
				refIDs := map[string]bool{}
				for _, tg := range p.Targets {
					queries++
					g.Expect(refIDs[tg.RefID]).To(BeFalse(), "panel %q: refId %q twice", p.Title, tg.RefID)
					refIDs[tg.RefID] = true
					g.Expect(tg.Datasource["uid"]).To(Equal(fromVariable), "panel %q", p.Title)
					g.Expect(strings.TrimSpace(tg.Expr)).NotTo(BeEmpty(), "panel %q", p.Title)
					names, err := MetricNames(tg.Expr)
					g.Expect(err).NotTo(HaveOccurred(), "panel %q", p.Title)
					g.Expect(names).NotTo(BeEmpty(), "panel %q: %s", p.Title, tg.Expr)
					for _, u := range usedVariables(tg.Expr) {
						g.Expect(defined).To(ContainElement(u), "panel %q uses $%s, which is not defined", p.Title, u)
					}
				}
			}
			g.Expect(queries).To(BeNumerically(">=", 10))
		})
	}
}

// config/grafana/kustomization.yaml makes a ConfigMap of every dashboard.
func TestKustomizationHoldsEveryDashboard(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(configGrafana(t), "kustomization.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var k struct {
		GeneratorOptions struct {
			DisableNameSuffixHash bool              `json:"disableNameSuffixHash"`
			Labels                map[string]string `json:"labels"`
		} `json:"generatorOptions"`
		ConfigMapGenerator []struct {
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	g.Expect(yaml.Unmarshal(data, &k)).To(Succeed())
	g.Expect(k.GeneratorOptions.DisableNameSuffixHash).To(BeTrue())
	g.Expect(k.GeneratorOptions.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
	var files []string
	for _, c := range k.ConfigMapGenerator {
		files = append(files, c.Files...)
	}
	boards, err := Load(configGrafana(t))
	g.Expect(err).NotTo(HaveOccurred())
	var want []string
	for f := range boards {
		want = append(want, f)
	}
	slices.Sort(files)
	slices.Sort(want)
	g.Expect(files).To(Equal(want))
}
