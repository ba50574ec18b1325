package hadoopconf

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// noEnv is an empty environment, so that tests never depend on the machine's.
func noEnv(string) (string, bool) { return "", false }

// envOf returns a LookupEnv over a fixed environment.
func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

// fromXML builds a Configuration from configuration documents, failing the
// test if one does not load.
func fromXML(t *testing.T, opts Options, docs ...string) *Configuration {
	t.Helper()
	if opts.LookupEnv == nil {
		opts.LookupEnv = noEnv
	}
	c := New(opts)
	for i, d := range docs {
		if err := c.AddResource(strings.NewReader(d), "doc"+string(rune('1'+i))); err != nil {
			t.Fatalf("AddResource(doc%d): %v", i+1, err)
		}
	}
	return c
}

// props writes a configuration document holding name/value pairs.
func props(kv ...string) string {
	var b strings.Builder
	b.WriteString("<configuration>")
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString("<property><name>" + kv[i] + "</name><value>" + kv[i+1] + "</value></property>")
	}
	b.WriteString("</configuration>")
	return b.String()
}

func mustGet(t *testing.T, c *Configuration, name string) string {
	t.Helper()
	v, err := c.Get(name, "<unset>")
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return v
}

// The cluster owner's core-site.xml marks the ACL settings final; a user's
// yarn-site.xml loaded after it must not loosen them, while its other
// settings apply.
func TestSiteFilesMergeInOrderAndFinalPropertiesHold(t *testing.T) {
	c := New(Options{LookupEnv: envOf(map[string]string{"USER": "knit"})})
	for _, f := range []string{"testdata/core-site.xml", "testdata/yarn-site.xml"} {
		if err := c.AddFile(f); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"yarn.acl.enable":                 "true",
		"yarn.admin.acl":                  "yarn admins",
		"hadoop.tmp.dir":                  "/tmp/hadoop-knit",
		"yarn.resourcemanager.hostname":   "rm.knit.example.com",
		"yarn.resourcemanager.cluster-id": "  knit-prod  ",
		// Read from the attribute form.
		"yarn.resourcemanager.max-completed-applications": "500",
	} {
		if got := mustGet(t, c, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if c.Has("yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs") {
		t.Error("an empty <value> set the property; Hadoop leaves it unset")
	}
	if got := c.Source("yarn.admin.acl"); got != "testdata/core-site.xml" {
		t.Errorf("Source(yarn.admin.acl) = %q, want the file that set it", got)
	}
	if !c.IsFinal("yarn.admin.acl") || c.IsFinal("hadoop.tmp.dir") {
		t.Error("IsFinal does not report the final marks")
	}
	want := []string{
		"testdata/yarn-site.xml: an attempt to override final parameter: yarn.acl.enable;  Ignoring.",
		"testdata/yarn-site.xml: an attempt to override final parameter: yarn.admin.acl;  Ignoring.",
	}
	if got := c.Warnings(); !slices.Equal(got, want) {
		t.Errorf("Warnings() = %q, want %q", got, want)
	}
}

func TestMergeRules(t *testing.T) {
	tests := []struct {
		name string
		docs []string
		key  string
		want string
	}{
		{
			name: "a later resource overrides an earlier one",
			docs: []string{props("k", "one"), props("k", "two")},
			key:  "k", want: "two",
		},
		{
			name: "a later definition in the same resource overrides",
			docs: []string{props("k", "one", "k", "two")},
			key:  "k", want: "two",
		},
		{
			name: "final holds within the resource that set it",
			docs: []string{`<configuration>
				<property><name>k</name><value>one</value><final>true</final></property>
				<property><name>k</name><value>two</value></property></configuration>`},
			key: "k", want: "one",
		},
		{
			// Hadoop records the final mark even when the value is empty.
			name: "final without a value freezes the earlier value",
			docs: []string{props("k", "one"), `<configuration>
				<property><name>k</name><final>true</final></property></configuration>`,
				props("k", "three")},
			key: "k", want: "one",
		},
		{
			name: "final is only the word true",
			docs: []string{`<configuration>
				<property><name>k</name><value>one</value><final>yes</final></property></configuration>`,
				props("k", "two")},
			key: "k", want: "two",
		},
		{
			name: "names are trimmed, values are not",
			docs: []string{props("  k\n", " ")},
			key:  "k", want: " ",
		},
		{
			name: "properties in a nested configuration element count",
			docs: []string{`<configuration><configuration>` +
				`<property><name>k</name><value>v</value></property></configuration></configuration>`},
			key: "k", want: "v",
		},
		{
			name: "unknown elements and a property outside configuration are ignored",
			docs: []string{`<configuration><extra><property><name>k</name><value>x</value></property></extra>` +
				`<property><name>k</name><value>v</value><description>d</description><source>s</source></property>` +
				`</configuration>`},
			key: "k", want: "v",
		},
		{
			name: "CDATA and entities are text",
			docs: []string{`<configuration><property><name>k</name><value><![CDATA[a<b]]>&amp;&#x20;</value></property></configuration>`},
			key:  "k", want: "a<b& ",
		},
		{
			name: "a property without a name is ignored",
			docs: []string{`<configuration><property><value>v</value></property></configuration>`},
			key:  "", want: "<unset>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fromXML(t, Options{}, tt.docs...)
			if got := mustGet(t, c, tt.key); got != tt.want {
				t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}

// Refused input must leave the Configuration as it was: a bad refresh never
// half-applies.
func TestMalformedResourcesAreRefusedWhole(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{"not XML", "yarn.acl.enable=true"},
		{"empty", ""},
		{"wrong document element", "<properties><property><name>a</name><value>b</value></property></properties>"},
		{"truncated", "<configuration><property><name>a</name><value>b</value>"},
		{"mismatched tags", "<configuration><property><name>a</value></property></configuration>"},
		{"XInclude", `<configuration xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="other.xml"/></configuration>`},
		{"bare include", `<configuration><include href="/etc/passwd"/></configuration>`},
		{"undeclared entity", "<configuration><property><name>a</name><value>&lol;</value></property></configuration>"},
		{"unsupported encoding", `<?xml version="1.0" encoding="EBCDIC"?><configuration/>`},
		{"trailing element", "<configuration/><configuration/>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fromXML(t, Options{}, props("before", "kept"))
			err := c.AddResource(strings.NewReader(tt.doc), "bad.xml")
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("AddResource = %v, want ErrMalformed", err)
			}
			if !strings.HasPrefix(err.Error(), "bad.xml: ") {
				t.Errorf("error %q does not name the resource", err)
			}
			if got := c.Names(); !slices.Equal(got, []string{"before"}) {
				t.Errorf("Names() = %q after a refused resource", got)
			}
		})
	}
}

func TestLimitsRefuseOversizedResources(t *testing.T) {
	deep := strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40)
	tests := []struct {
		name string
		lim  Limits
		doc  string
	}{
		{"bytes", Limits{MaxBytes: 64}, props("k", strings.Repeat("v", 100))},
		{"properties in one resource", Limits{MaxProperties: 2}, props("a", "1", "b", "2", "c", "3")},
		{"name", Limits{MaxNameBytes: 8}, props("a-long-property-name", "1")},
		{"value", Limits{MaxValueBytes: 8}, props("k", "a value too long")},
		{"value in attribute", Limits{MaxValueBytes: 8}, `<configuration><property name="k" value="a value too long"/></configuration>`},
		{"depth", Limits{}, "<configuration>" + deep + "</configuration>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{Limits: tt.lim, LookupEnv: noEnv})
			err := c.AddResource(strings.NewReader(tt.doc), "big.xml")
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("AddResource = %v, want ErrTooLarge", err)
			}
			if len(c.Names()) != 0 {
				t.Errorf("a refused resource set %q", c.Names())
			}
		})
	}
}

// MaxProperties bounds the merged Configuration, not only one resource, so
// that many small files cannot add up to an unbounded one.
func TestLimitsBoundPropertiesAcrossResources(t *testing.T) {
	c := fromXML(t, Options{Limits: Limits{MaxProperties: 3}}, props("a", "1", "b", "2"))
	if err := c.AddResource(strings.NewReader(props("a", "x", "c", "3")), "ok.xml"); err != nil {
		t.Fatalf("overriding one and adding one: %v", err)
	}
	err := c.AddResource(strings.NewReader(props("d", "4")), "over.xml")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AddResource past the total = %v, want ErrTooLarge", err)
	}
}

func TestAddFileRefusesLargeFilesBeforeReading(t *testing.T) {
	c := New(Options{Limits: Limits{MaxBytes: 100}, LookupEnv: noEnv})
	err := c.AddFile("testdata/yarn-site.xml")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AddFile = %v, want ErrTooLarge", err)
	}
	if err := c.AddFile("testdata/missing.xml"); err == nil {
		t.Fatal("AddFile of a missing file succeeded")
	}
}

// Old Hadoop installations ship files declared ISO-8859-1.
func TestLatin1ResourcesAreDecoded(t *testing.T) {
	doc := "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><configuration><property>" +
		"<name>k</name><value>caf\xe9</value></property></configuration>"
	c := fromXML(t, Options{}, doc)
	if got := mustGet(t, c, "k"); got != "café" {
		t.Errorf("k = %q, want café", got)
	}
}

func TestSetDefaultAndClone(t *testing.T) {
	c := fromXML(t, Options{}, props("a", "file"))
	c.SetDefault("a", "default")
	c.SetDefault("b", "default")
	if mustGet(t, c, "a") != "file" || mustGet(t, c, "b") != "default" {
		t.Errorf("SetDefault: a=%q b=%q", mustGet(t, c, "a"), mustGet(t, c, "b"))
	}
	d := c.Clone()
	d.Set("a", "clone")
	if mustGet(t, c, "a") != "file" {
		t.Error("changing a clone changed the original")
	}
	if raw, ok := d.Raw("a"); !ok || raw != "clone" {
		t.Errorf("Raw(a) = %q, %v", raw, ok)
	}
}

func TestAddDirReadsTheFilesItHasInOrder(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"core-site.xml": "core", "yarn-site.xml": "yarn"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(props("k", v)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := New(Options{LookupEnv: noEnv})
	if err := c.AddDir(dir, "core-site.xml", "missing-site.xml", "yarn-site.xml"); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, "k"); got != "yarn" {
		t.Errorf("k = %q, want the later file's", got)
	}
	if err := New(Options{LookupEnv: noEnv}).AddDir("", "core-site.xml"); err != nil {
		t.Errorf("an empty dir: %v", err)
	}
}
