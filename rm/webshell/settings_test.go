package webshell

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/knitdev/knit/hadoopconf"
)

func TestLoadSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     map[string]string
		rmWeb   []string
		want    Settings
		wantErr string
	}{
		{"defaults allow the RM's own origins", nil, []string{"10.0.0.1:8088", "rm.example:8088", "rm.example:8088"}, Settings{
			Enabled: true, Policy: PolicyModify, MaxPerUser: DefaultMaxPerUser, MaxPerContainer: DefaultMaxPerContainer,
			IdleTimeout: DefaultIdleTimeout, Recheck: DefaultRecheck, Origins: []string{"http://10.0.0.1:8088", "http://rm.example:8088"},
		}, ""},
		{"a wildcard bind address is reached on the loopback", map[string]string{
			KeyPolicy: "Owner", KeyMaxPerUser: "2", KeyMaxPerContainer: "1", KeyIdleTimeout: "60000", KeyRecheck: "500",
			KeyOrigins: "https://RM.example.com, http://proxy:80", KeyEnabled: "false",
		}, []string{"0.0.0.0:8088"}, Settings{
			Policy: PolicyOwner, MaxPerUser: 2, MaxPerContainer: 1, IdleTimeout: time.Minute, Recheck: 500 * time.Millisecond,
			Origins: []string{"http://127.0.0.1:8088", "http://localhost:8088", "http://proxy:80", "https://rm.example.com"},
		}, ""},
		{"an unknown policy", map[string]string{KeyPolicy: "everyone"}, []string{"rm:8088"}, Settings{}, "none of modify, owner, view"},
		{"a negative limit", map[string]string{KeyMaxPerUser: "-1"}, []string{"rm:8088"}, Settings{}, "negative"},
		{"an origin with a path", map[string]string{KeyOrigins: "http://rm:8088/cluster"}, []string{"rm:8088"}, Settings{}, "is not an origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{})
			for k, v := range tc.set {
				c.Set(k, v)
			}
			got, err := LoadSettings(c, tc.rmWeb...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadSettings = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
