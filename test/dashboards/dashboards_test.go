package dashboards

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMetricNamesAreEverySelectorsName(t *testing.T) {
	dir := t.TempDir()
	doc := `{"panels":[{"targets":[{"expr":"sum by (le) (rate(a_seconds_bucket{q=~\"$queue\"}[$__rate_interval])) / on() b"}]},
	  {"panels":[{"targets":[{"expr":"{__name__=\"c\", x=\"${v}\"}"}]}]}],
	 "templating":{"list":[{"query":{"query":"label_values(d{q=\"1\"}, user)"},"definition":"label_values(d, user)"}]}}`
	if err := os.WriteFile(filepath.Join(dir, "one.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := MetricNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_seconds_bucket", "b", "c", "d"}; !slices.Equal(got["one.json"], want) {
		t.Errorf("names %v, want %v", got["one.json"], want)
	}
}

func TestExpressionsThatDoNotParseOrNameNoMetricAreRefused(t *testing.T) {
	for name, expr := range map[string]string{
		"unbalanced":      `sum(rate(a[5m])`,
		"no metric name":  `{job=\"x\"}`,
		"a name by regex": `{__name__=~\"a.*\"}`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "d.json"), []byte(`{"targets":[{"expr":"`+expr+`"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := MetricNames(dir); err == nil {
			t.Errorf("%s: %s accepted", name, expr)
		}
	}
	if _, err := MetricNames(t.TempDir()); err == nil {
		t.Error("a folder without dashboards accepted")
	}
}
