package hadoopconf

import (
	"slices"
	"strings"
	"testing"
)

func TestRMHAIDsAndPerRMAddresses(t *testing.T) {
	c := New(Options{})
	if err := c.AddResource(strings.NewReader(`<configuration>
<property><name>yarn.resourcemanager.ha.enabled</name><value>true</value></property>
<property><name>yarn.resourcemanager.ha.rm-ids</name><value>rm1, rm2</value></property>
<property><name>yarn.resourcemanager.address.rm1</name><value>127.0.0.1:18032</value></property>
<property><name>yarn.resourcemanager.hostname.rm2</name><value>rm2.example</value></property>
<property><name>yarn.resourcemanager.webapp.address.rm2</name><value>rm2.example:9088</value></property>
</configuration>`), "yarn-site.xml"); err != nil {
		t.Fatal(err)
	}
	ids, err := RMHAIDs(c)
	if err != nil || !slices.Equal(ids, []string{"rm1", "rm2"}) {
		t.Fatalf("RMHAIDs = %v, %v", ids, err)
	}
	tests := []struct{ id, key, want string }{
		{"rm1", KeyRMAddress, "127.0.0.1:18032"},
		{"rm2", KeyRMAddress, "rm2.example:8032"},
		{"rm2", KeyRMAdminAddress, "rm2.example:8033"},
		{"rm2", KeyRMWebappAddress, "rm2.example:9088"},
		{"rm2", KeyRMHostname, "rm2.example"},
	}
	for _, tt := range tests {
		if got, _ := ForRM(c, tt.id).Get(tt.key, ""); got != tt.want {
			t.Errorf("ForRM(%s) %s = %q, want %q", tt.id, tt.key, got, tt.want)
		}
	}
}

func TestRMHAIDsOffOrTooFew(t *testing.T) {
	off := New(Options{})
	if ids, err := RMHAIDs(off); ids != nil || err != nil {
		t.Errorf("HA off: %v, %v", ids, err)
	}
	one := New(Options{})
	one.Set(KeyRMHAEnabled, "true")
	one.Set(KeyRMHAIDs, "rm1")
	if _, err := RMHAIDs(one); err == nil {
		t.Error("HA with one id: no error")
	}
}
