package hadoopconf

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The client's hadoop-conf/yarn-site.xml is written here and read by Java;
// whatever Write produces must read back as the same properties, including
// values that only survive if not trimmed or if escaped.
func TestWrittenPropertiesReadBackUnchanged(t *testing.T) {
	in := []Property{
		{Name: "yarn.resourcemanager.address", Value: "127.0.1.1:8032"},
		{Name: "yarn.scheduler.capacity.root.a.acl_submit_applications", Value: " "},
		{Name: "knit.escape", Value: `<a href="x">&'</a>` + "\ttab\nline\r"},
		{Name: "knit.unicode", Value: "café ☕ 𝄞"},
		{Name: "knit.vars", Value: "${yarn.resourcemanager.address}"},
		{Name: "yarn.admin.acl", Value: "yarn admins", Final: true},
	}
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	c := New(Options{LookupEnv: noEnv})
	if err := c.AddResource(&buf, "written.xml"); err != nil {
		t.Fatalf("reading back: %v\n%s", err, buf.String())
	}
	for _, p := range in {
		got, ok := c.Raw(p.Name)
		if !ok || got != p.Value {
			t.Errorf("%s read back as %q, %v; want %q", p.Name, got, ok, p.Value)
		}
		if c.IsFinal(p.Name) != p.Final {
			t.Errorf("%s final = %v, want %v", p.Name, c.IsFinal(p.Name), p.Final)
		}
	}
}

func TestWriteXMLIsSortedAndReadable(t *testing.T) {
	c := fromXML(t, Options{}, props("b", "2", "a", "1"))
	var buf bytes.Buffer
	if err := c.WriteXML(&buf); err != nil {
		t.Fatal(err)
	}
	want := `<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <property>
    <name>a</name>
    <value>1</value>
  </property>
  <property>
    <name>b</name>
    <value>2</value>
  </property>
</configuration>
`
	if buf.String() != want {
		t.Errorf("WriteXML wrote\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestUnwritablePropertiesAreRefusedBeforeWriting(t *testing.T) {
	tests := []struct {
		name string
		p    Property
	}{
		{"empty name", Property{Name: "", Value: "v"}},
		{"untrimmed name", Property{Name: " k", Value: "v"}},
		{"control character", Property{Name: "k", Value: "a\x00b"}},
		{"invalid UTF-8", Property{Name: "k", Value: "a\xffb"}},
		{"surrogate-free noncharacter", Property{Name: "k", Value: "\uFFFE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, []Property{{Name: "ok", Value: "1"}, tt.p})
			if !errors.Is(err, ErrUnwritable) {
				t.Fatalf("Write = %v, want ErrUnwritable", err)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %q before refusing", buf.String())
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportsWriterErrors(t *testing.T) {
	err := Write(failingWriter{}, []Property{{Name: "k", Value: strings.Repeat("v", 10)}})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Write = %v, want the writer's error", err)
	}
}
