package amrmproxy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/token"
)

func TestSettingsFromHadoop(t *testing.T) {
	tests := []struct {
		name    string
		set     map[string]string
		want    Settings
		wantErr bool
	}{
		{"yarn-default's values", nil, Settings{Address: DefaultAddress, Pipeline: []string{DefaultInterceptorName}, RollInterval: 24 * time.Hour, ActivationDelay: 15 * time.Minute}, false},
		{"the proxy switched on at another address", map[string]string{hadoopconf.KeyAMRMProxyEnabled: "true", hadoopconf.KeyAMRMProxyAddress: "0.0.0.0:9049"},
			Settings{Enabled: true, Address: "0.0.0.0:9049", Pipeline: []string{DefaultInterceptorName}, RollInterval: 24 * time.Hour, ActivationDelay: 15 * time.Minute}, false},
		{"a pipeline of two", map[string]string{hadoopconf.KeyAMRMProxyPipeline: "a, " + DefaultInterceptorName},
			Settings{Address: DefaultAddress, Pipeline: []string{"a", DefaultInterceptorName}, RollInterval: 24 * time.Hour, ActivationDelay: 15 * time.Minute}, false},
		{"a roll interval under 3 AM expiries is refused", map[string]string{hadoopconf.KeyAMRMTokenRollingInterval: "1800"}, Settings{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{})
			for k, v := range tt.set {
				c.Set(k, v)
			}
			got, err := SettingsFromHadoop(c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("SettingsFromHadoop = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && (got.Enabled != tt.want.Enabled || got.Address != tt.want.Address || !slices.Equal(got.Pipeline, tt.want.Pipeline) ||
				got.RollInterval != tt.want.RollInterval || got.ActivationDelay != tt.want.ActivationDelay) {
				t.Fatalf("settings %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWriteAMConfPointsTheSchedulerAtTheProxy(t *testing.T) {
	tests := []struct {
		name string
		site string
		keys []string // scheduler keys that must name the proxy
	}{
		{"one RM", `<configuration><property><name>yarn.resourcemanager.scheduler.address</name><value>rm:8030</value></property></configuration>`,
			[]string{hadoopconf.KeyRMSchedulerAddress}},
		{"RM HA", `<configuration><property><name>yarn.resourcemanager.ha.enabled</name><value>true</value></property>` +
			`<property><name>yarn.resourcemanager.ha.rm-ids</name><value>rm1,rm2</value></property></configuration>`,
			[]string{hadoopconf.KeyRMSchedulerAddress, hadoopconf.KeyRMSchedulerAddress + ".rm1", hadoopconf.KeyRMSchedulerAddress + ".rm2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, dst := t.TempDir(), filepath.Join(t.TempDir(), "am")
			if err := os.WriteFile(filepath.Join(src, "yarn-site.xml"), []byte(tt.site), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "core-site.xml"), []byte("<configuration/>"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := WriteAMConf(dst, src, "127.0.1.1:8049"); err != nil {
				t.Fatal(err)
			}
			c := hadoopconf.New(hadoopconf.Options{})
			if err := c.AddFile(filepath.Join(dst, "yarn-site.xml")); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keys {
				if v, _, _ := c.Lookup(k); v != "127.0.1.1:8049" {
					t.Errorf("%s = %q, want the proxy", k, v)
				}
			}
			if _, err := os.Stat(filepath.Join(dst, "core-site.xml")); err != nil {
				t.Errorf("core-site.xml not copied: %v", err)
			}
			addr, _, err := client.ConfAddress(dst, hadoopconf.KeyRMSchedulerAddress, 8030)
			if err != nil || !strings.Contains(addr, "127.0.1.1:8049") {
				t.Errorf("the AM's client reads scheduler %q (%v), want the proxy", addr, err)
			}
		})
	}
}

func TestTakeAMRMTokenSwapsOnlyTheAMRMToken(t *testing.T) {
	tests := []struct {
		name      string
		tokens    map[string]token.Token
		wantTaken bool
	}{
		{"the AMRMToken is swapped, others kept", map[string]token.Token{"": rmToken("real-1"), "hdfs": {Identifier: []byte("dt"), Kind: "HDFS_DELEGATION_TOKEN"}}, true},
		{"credentials without an AMRMToken are left alone", map[string]token.Token{"hdfs": {Identifier: []byte("dt"), Kind: "HDFS_DELEGATION_TOKEN"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := New(Config{Secrets: testSecrets(t), Pipeline: []string{DefaultInterceptorName}, Stages: defaultStages("127.0.0.1:1"), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			var creds token.Credentials
			for a, tok := range tt.tokens {
				creds.AddToken(a, tok)
			}
			taken, err := svc.TakeAMRMToken(testCtx(t), testAttempt, "alice", &creds)
			if err != nil || taken != tt.wantTaken {
				t.Fatalf("TakeAMRMToken = %v, %v; want %v", taken, err, tt.wantTaken)
			}
			for alias, tok := range creds.TokensOfKind(client.KindAMRMToken) {
				if _, _, err := svc.cfg.Secrets.RetrievePassword(tok.Identifier); err != nil {
					t.Fatalf("token under %q is not the node's: %v", alias, err)
				}
			}
			if dt, ok := creds.Token("hdfs"); !ok || string(dt.Identifier) != "dt" {
				t.Fatal("the other token was not kept")
			}
		})
	}
}
