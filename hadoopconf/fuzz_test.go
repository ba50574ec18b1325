package hadoopconf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzAddResource feeds arbitrary bytes to the parser, as a user's
// capacity-scheduler.xml or an admin's refresh can. It must never panic,
// must fail only with ErrTooLarge or ErrMalformed, must stay within its
// limits, and whatever it accepts must survive a Write and a second read
// unchanged (the path the client's yarn-site.xml takes).
func FuzzAddResource(f *testing.F) {
	files, err := filepath.Glob("testdata/*.xml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"<configuration/>",
		`<configuration><property name="a" value="b" final="true"/></configuration>`,
		"<configuration><property><name>a</name><value> </value></property></configuration>",
		"<configuration><property><name>a</name><value><![CDATA[x]]>&amp;</value></property></configuration>",
		"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><configuration><property><name>\xe9</name><value>\xff</value></property></configuration>",
		"<configuration><configuration><property><name>a</name><value>${a}</value></property></configuration></configuration>",
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBytes: 1 << 16, MaxProperties: 256, MaxNameBytes: 256, MaxValueBytes: 1 << 12, MaxDepth: 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := New(Options{Limits: lim, LookupEnv: noEnv})
		err := c.AddResource(bytes.NewReader(data), "fuzz.xml")
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error class: %v", err)
			}
			if len(c.Names()) != 0 {
				t.Fatal("a refused resource set properties")
			}
			return
		}
		names := c.Names()
		if len(names) > lim.MaxProperties {
			t.Fatalf("%d properties, limit %d", len(names), lim.MaxProperties)
		}
		for _, n := range names {
			v, _ := c.Raw(n)
			if n == "" || len(n) > lim.MaxNameBytes || len(v) > lim.MaxValueBytes || v == "" {
				t.Fatalf("property %q = %q breaks a parser guarantee", n, v)
			}
			if _, err := c.Get(n, ""); err != nil && !errors.Is(err, ErrSubstitution) {
				t.Fatalf("Get(%q): %v", n, err)
			}
		}
		var buf bytes.Buffer
		if err := c.WriteXML(&buf); err != nil {
			if errors.Is(err, ErrUnwritable) {
				return // e.g. a name with a character only the input's encoding allowed
			}
			t.Fatal(err)
		}
		d := New(Options{LookupEnv: noEnv})
		if err := d.AddResource(&buf, "rewritten.xml"); err != nil {
			t.Fatalf("reading back what WriteXML wrote: %v", err)
		}
		for _, n := range names {
			v, _ := c.Raw(n)
			w, ok := d.Raw(n)
			if !ok || v != w || c.IsFinal(n) != d.IsFinal(n) {
				t.Fatalf("%q = %q (final %v) read back as %q, %v (final %v)", n, v, c.IsFinal(n), w, ok, d.IsFinal(n))
			}
		}
	})
}
