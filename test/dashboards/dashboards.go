// Package dashboards reads Tend's Grafana dashboards (config/grafana) for
// their tests: their panels' PromQL expressions and the metrics those name.
// The unit test checks the dashboards' structure; the e2e test
// (test/e2e/dashboards_test.go) checks that every metric they name is served
// by a running manager or etcd member.
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Dashboard is the part of a Grafana dashboard that the tests read.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is one panel.
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []Target       `json:"targets"`
}

// Target is one query of a panel.
type Target struct {
	Datasource map[string]any `json:"datasource"`
	Expr       string         `json:"expr"`
	RefID      string         `json:"refId"`
}

// Load reads every dashboard in dir (config/grafana), by file name.
func Load(dir string) (map[string]*Dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]*Dashboard{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d := &Dashboard{}
		if err := json.Unmarshal(data, d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out, nil
}

// Exprs are the dashboard's PromQL expressions: its panels' and its query
// variables'.
func (d *Dashboard) Exprs() []string {
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			if s, ok := q["query"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	braces    = regexp.MustCompile(`\{[^{}]*\}`)
	brackets  = regexp.MustCompile(`\[[^\[\]]*\]`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	variables = regexp.MustCompile(`\$\{?\w+\}?`)
	numbers   = regexp.MustCompile(`\b\d[\d.e+]*[a-z]*\b`) // 0.99, 1e3, and durations: 5m

	identifiers = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	keywords    = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"}
)

// MetricNames returns the metric names that a PromQL expression (or a
// Grafana label_values query) selects, sorted and without duplicates.
// Function and aggregation names, label names, keywords, strings, ranges
// and Grafana variables are not metric names.
func MetricNames(expr string) []string {
	s := quoted.ReplaceAllString(expr, `""`)
	s = variables.ReplaceAllString(s, "")
	s = braces.ReplaceAllString(s, "{}")
	s = brackets.ReplaceAllString(s, "[]")
	s = grouping.ReplaceAllString(s, "")
	s = numbers.ReplaceAllString(s, "0")
	// label_values(metric, label): the second argument is a label.
	if rest, ok := strings.CutPrefix(strings.TrimSpace(s), "label_values("); ok {
		if i := strings.LastIndex(rest, ","); i >= 0 {
			s = rest[:i]
		} else {
			s = strings.TrimSuffix(rest, ")")
		}
	}
	var out []string
	for _, m := range identifiers.FindAllStringSubmatch(s, -1) {
		name := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[0]), "("))
		if m[1] != "" || slices.Contains(keywords, strings.ToLower(name)) {
			continue // a function or aggregation, or a keyword
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Family is the metric family a series name belongs to: a histogram's or
// summary's _bucket, _sum and _count series belong to their base name.
func Family(name string, families map[string]bool) (string, bool) {
	if families[name] {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] {
			return base, true
		}
	}
	return name, false
}

// Families reads the metric family names of a Prometheus text exposition:
// its "# TYPE name kind" lines.
func Families(exposition string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}
