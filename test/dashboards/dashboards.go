// Package dashboards reads Knit's Grafana dashboards (manifests/dashboards)
// for the tests that check them against what the binaries serve: every
// PromQL expression of a dashboard, its panels' and its template
// variables', parsed with Prometheus's own parser, and the metric names
// they select.
//
// Imports: the standard library and Prometheus's promql/parser.
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Dir is where the dashboards are, from a package folder of the module
// two levels down (cmd/knit-rm, cmd/knit-node).
const Dir = "../../manifests/dashboards"

// grafanaVariable is a Grafana variable in an expression: $name, ${name}
// or [[name]].
var grafanaVariable = regexp.MustCompile(`\$__[a-z_]+|\$\{[^}]+\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]+\]\]`)

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// MetricNames returns, for each dashboard file in dir, the metric names
// its expressions select, sorted. An expression that does not parse, or
// that selects series by something other than a metric name, is an error.
func MetricNames(dir string) (map[string][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("dashboards: none in %s", dir)
	}
	out := map[string][]string{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", file, err)
		}
		exprs := expressions(doc)
		if len(exprs) == 0 {
			return nil, fmt.Errorf("dashboards: %s holds no PromQL", file)
		}
		names := map[string]bool{}
		for _, e := range exprs {
			n, err := selected(e)
			if err != nil {
				return nil, fmt.Errorf("dashboards: %s: %w", filepath.Base(file), err)
			}
			for _, name := range n {
				names[name] = true
			}
		}
		list := make([]string, 0, len(names))
		for n := range names {
			list = append(list, n)
		}
		slices.Sort(list)
		out[filepath.Base(file)] = list
	}
	return out, nil
}

// expressions are the PromQL of a dashboard: every panel target's "expr",
// and the selector of every label_values variable query.
func expressions(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			s, isString := x.(string)
			switch {
			case k == "expr" && isString:
				out = append(out, s)
			case (k == "query" || k == "definition") && isString:
				if m := labelValues.FindStringSubmatch(s); m != nil {
					out = append(out, m[1])
				}
			default:
				out = append(out, expressions(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, expressions(x)...)
		}
	}
	return out
}

// selected parses expr, its Grafana variables replaced by values of their
// kind, and returns the metric names of its selectors.
func selected(expr string) ([]string, error) {
	concrete := grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(v, "$__") {
			return "5m" // $__rate_interval, $__interval
		}
		return "variable"
	})
	e, err := parser.ParseExpr(concrete)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("%q selects series by no metric name", expr)
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}
