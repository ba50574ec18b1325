package main

import (
	"strings"
	"testing"

	"github.com/knitdev/knit/hadoopconf"
)

func haConf(t *testing.T) *hadoopconf.Configuration {
	t.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	if err := c.AddResource(strings.NewReader(`<configuration>
<property><name>yarn.resourcemanager.ha.enabled</name><value>true</value></property>
<property><name>yarn.resourcemanager.ha.rm-ids</name><value>rm1,rm2</value></property>
<property><name>yarn.resourcemanager.ha.id</name><value>rm2</value></property>
<property><name>yarn.resourcemanager.webapp.address.rm1</name><value>0.0.0.0:18088</value></property>
<property><name>yarn.resourcemanager.hostname.rm2</name><value>rm2.example</value></property>
</configuration>`), "yarn-site.xml"); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRMIDComesFromTheFlagThenTheConfiguration(t *testing.T) {
	c := haConf(t)
	ids := []string{"rm1", "rm2"}
	tests := []struct {
		name, flag, want string
		wantErr          bool
	}{
		{"the flag wins", "rm1", "rm1", false},
		{"else yarn.resourcemanager.ha.id", "", "rm2", false},
		{"an id not among rm-ids is refused", "rm3", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rmID(haFlags{id: tt.flag}, c, ids)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("rmID = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestAStandbyRedirectsToTheActiveRMsWebAddress(t *testing.T) {
	r := &replica{id: "rm2", ids: []string{"rm1", "rm2"}, conf: haConf(t)}
	tests := []struct{ leader, want string }{
		{"rm1", "http://127.0.0.1:18088"},
		{"rm2", "http://rm2.example:8088"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := r.webURL(tt.leader); got != tt.want {
			t.Errorf("webURL(%q) = %q, want %q", tt.leader, got, tt.want)
		}
	}
	// Without rm-ids, no replica has an address of its own to name.
	if got := (&replica{id: "host-a", conf: haConf(t)}).webURL("host-b"); got != "" {
		t.Errorf("webURL without HA = %q, want none", got)
	}
}
