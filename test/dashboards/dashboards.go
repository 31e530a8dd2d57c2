// Package dashboards reads Tend's Grafana dashboards (config/grafana) for
// their tests: their panels' PromQL expressions and the metrics those name.
// The unit test checks the dashboards' structure and that every query
// tokenizes; the e2e test (test/e2e/dashboards_test.go) checks that every
// metric they name is served by a running manager or etcd member. It reads
// files only and never talks to a cluster.
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Dashboard is the part of a Grafana dashboard that the tests read.
type Dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Variable is one template variable.
type Variable struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Datasource map[string]any `json:"datasource"`
	Query      any            `json:"query"`
}

// Panel is one panel. A collapsed row holds its panels.
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []Target       `json:"targets"`
	Panels     []Panel        `json:"panels"`
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

// VariableQuery is a query variable's query: a label_values(...) or
// query_result(...) call, or "" for other kinds of variable.
func (v *Variable) VariableQuery() string {
	if v.Type != "query" {
		return ""
	}
	switch q := v.Query.(type) {
	case string:
		return q
	case map[string]any:
		s, _ := q["query"].(string)
		return s
	}
	return ""
}

// AllPanels are the dashboard's panels, with those inside collapsed rows.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Exprs are the dashboard's queries: its panels' PromQL expressions and its
// query variables' queries.
func (d *Dashboard) Exprs() []string {
	var out []string
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	for i := range d.Templating.List {
		if q := d.Templating.List[i].VariableQuery(); q != "" {
			out = append(out, q)
		}
	}
	return out
}

// Words that stand where a metric name could but are not one: PromQL's
// keywords, and its aggregations, which may come before by (...).
var keywords = append([]string{
	"and", "or", "unless",
	"bool", "offset", "atan2", "inf", "nan",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}, labelLists...)

// labelLists are the keywords followed by a list of label names:
// by (a, b), on (a), group_left (c).
var labelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// MetricNames returns the metric names that a panel's PromQL expression,
// or a query variable's label_values(selector, label) or query_result(expr),
// selects, sorted and without duplicates. It is a tokenizer, not a parser
// (Prometheus' own parser would add Prometheus' module to go.mod, and with
// it the checksums of the cloud SDKs its tests use): it skips strings,
// numbers, durations, label matchers in {...}, ranges in
// [...], the label lists of by, without, on, ignoring, group_left and
// group_right, function names (a word before "("), keywords and Grafana
// variables. It fails on an unterminated string, unbalanced brackets or a
// character PromQL does not use.
func MetricNames(query string) ([]string, error) {
	s := strings.TrimSpace(query)
	// label_values(selector, label): the last argument is a label.
	if rest, ok := strings.CutPrefix(s, "label_values("); ok {
		i := strings.LastIndex(rest, ",")
		if i < 0 {
			return nil, fmt.Errorf("%q: label_values without a selector names no metric", query)
		}
		s = rest[:i]
	} else if rest, ok := strings.CutPrefix(s, "query_result("); ok {
		s = strings.TrimSuffix(rest, ")")
	}
	var (
		out    []string
		open   []byte // the brackets open at i
		labels = -1   // depth of a by (...) or on (...) label list, or -1
		prev   string // the previous word, in lower case
	)
	fail := func(i int, format string, args ...any) ([]string, error) {
		return nil, fmt.Errorf("%q at %d: %s", query, i, fmt.Sprintf(format, args...))
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue // keeps prev
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(s) {
				return fail(i, "unterminated string")
			}
			i = j + 1
		case c == '$':
			// A Grafana variable: $name, ${name} or ${name:format}.
			j := i + 1
			if j < len(s) && s[j] == '{' {
				k := strings.IndexByte(s[j:], '}')
				if k < 0 {
					return fail(i, "unterminated ${")
				}
				j += k + 1
			} else {
				for j < len(s) && isWordByte(s[j]) {
					j++
				}
			}
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			// A number (1, 0.99, 1e-3, 0x1F) or a duration (5m, 1h30m):
			// digits, letters and dots, and a sign after an exponent.
			j := i + 1
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.' ||
				(s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.HasPrefix(s[i:], "0x")) {
				j++
			}
			i = j
		case isWordByte(c) || c == ':':
			j := i
			for j < len(s) && (isWordByte(s[j]) || s[j] == ':') {
				j++
			}
			word := s[i:j]
			i = j
			for j < len(s) && strings.IndexByte(" \t\r\n", s[j]) >= 0 {
				j++
			}
			lower := strings.ToLower(word)
			inside := len(open) > 0 && open[len(open)-1] != '('
			switch {
			case inside && word == "__name__":
				// {__name__="name"}: a metric name after all.
				if name, ok := nameMatcher(s[j:]); ok && !slices.Contains(out, name) {
					out = append(out, name)
				}
			case inside || labels >= 0:
				// A label name in {...}, a range in [...], or a label in a
				// by (...) list.
			case slices.Contains(labelLists, lower):
				if j < len(s) && s[j] == '(' {
					labels = len(open)
					open = append(open, '(')
					i = j + 1
				}
			case j < len(s) && s[j] == '(':
				// A function or an aggregation.
			case slices.Contains(keywords, lower):
			case prev == "offset":
				return fail(i, "offset %s is not a duration", word)
			default:
				if !slices.Contains(out, word) {
					out = append(out, word)
				}
			}
			prev = lower
			continue
		case c == '(' || c == '{' || c == '[':
			open = append(open, c)
			i++
		case c == ')' || c == '}' || c == ']':
			want := map[byte]byte{')': '(', '}': '{', ']': '['}[c]
			if len(open) == 0 || open[len(open)-1] != want {
				return fail(i, "unbalanced %c", c)
			}
			open = open[:len(open)-1]
			if labels == len(open) {
				labels = -1
			}
			i++
		case strings.IndexByte("+-*/%^=!<>~,@", c) >= 0:
			i++
		default:
			return fail(i, "unexpected %q", c)
		}
		prev = ""
	}
	if len(open) > 0 {
		return fail(len(s), "unclosed %c", open[len(open)-1])
	}
	slices.Sort(out)
	return out, nil
}

// nameMatcher reads the `="name"` after __name__ in a selector; a regular
// expression (=~) or a negation names no single metric.
func nameMatcher(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, "=")
	if !ok || strings.HasPrefix(rest, "~") {
		return "", false
	}
	rest = strings.TrimLeft(rest, " \t")
	if len(rest) < 2 || rest[0] != '"' && rest[0] != '\'' && rest[0] != '`' {
		return "", false
	}
	end := strings.IndexByte(rest[1:], rest[0])
	if end < 0 {
		return "", false
	}
	return rest[1 : end+1], true
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
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
