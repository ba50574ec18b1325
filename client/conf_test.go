package client

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/knitdev/knit/protocols/token"
)

func writeYarnSite(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func site(props string) string {
	return `<?xml version="1.0"?><configuration>` + props + `</configuration>`
}

func TestConfAddress(t *testing.T) {
	t.Setenv("KNIT_TEST_RM_HOST", "rm.from.env")
	tests := []struct {
		name    string
		dir     func(t *testing.T) string
		key     string
		port    int
		want    string
		wantOK  bool
		wantErr bool
	}{
		{"no configuration folder means the local host and the default port",
			func(*testing.T) string { return "" }, KeyRMAddress, DefaultRMPort, "127.0.0.1:8032", false, false},
		{"a folder without yarn-site.xml means the defaults",
			func(t *testing.T) string { return t.TempDir() }, KeySchedulerAddress, DefaultSchedulerPort, "127.0.0.1:8030", false, false},
		{"the key's value is used as written",
			func(t *testing.T) string {
				return writeYarnSite(t, site(`<property><name>yarn.resourcemanager.scheduler.address</name><value>10.0.0.5:18030</value></property>`))
			}, KeySchedulerAddress, DefaultSchedulerPort, "10.0.0.5:18030", true, false},
		{"the hostname gives the default port when the key is absent",
			func(t *testing.T) string {
				return writeYarnSite(t, site(`<property><name>yarn.resourcemanager.hostname</name><value>rm.example</value></property>`))
			}, KeyRMAddress, DefaultRMPort, "rm.example:8032", true, false},
		{"variables are substituted from the file and the environment",
			func(t *testing.T) string {
				return writeYarnSite(t, site(`<property><name>yarn.resourcemanager.hostname</name><value>${env.KNIT_TEST_RM_HOST}</value></property>`+
					`<property><name>yarn.resourcemanager.address</name><value>${yarn.resourcemanager.hostname}:9032</value></property>`))
			}, KeyRMAddress, DefaultRMPort, "rm.from.env:9032", true, false},
		{"the wildcard host becomes the local host",
			func(t *testing.T) string {
				return writeYarnSite(t, site(`<property><name>yarn.resourcemanager.address</name><value>0.0.0.0:8032</value></property>`))
			}, KeyRMAddress, DefaultRMPort, "127.0.0.1:8032", true, false},
		{"a bare host takes the default port",
			func(t *testing.T) string {
				return writeYarnSite(t, site(`<property><name>yarn.resourcemanager.address</name><value> rm.example </value></property>`))
			}, KeyRMAddress, DefaultRMPort, "rm.example:8032", true, false},
		{"a later definition replaces an earlier one",
			func(t *testing.T) string {
				return writeYarnSite(t, site(`<property><name>yarn.resourcemanager.address</name><value>a:1</value></property>`+
					`<property><name>yarn.resourcemanager.address</name><value>b:2</value></property>`))
			}, KeyRMAddress, DefaultRMPort, "b:2", true, false},
		{"a broken file is an error",
			func(t *testing.T) string { return writeYarnSite(t, `<configuration><property>`) }, KeyRMAddress, DefaultRMPort, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ConfAddress(tt.dir(t), tt.key, tt.port)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ConfAddress: %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ConfAddress = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestAMRMTokenFromCredentialsFile(t *testing.T) {
	amrm := testToken(KindAMRMToken, "appattempt_1700000000000_0001_000001")
	tests := []struct {
		name    string
		tokens  map[string]token.Token
		wantErr bool
	}{
		{"the AMRMToken is found under the RM's empty alias", map[string]token.Token{"": amrm, "hdfs": {Kind: "HDFS_DELEGATION_TOKEN"}}, false},
		{"credentials without one are an error", map[string]token.Token{"hdfs": {Kind: "HDFS_DELEGATION_TOKEN"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var creds token.Credentials
			for alias, tok := range tt.tokens {
				creds.AddToken(alias, tok)
			}
			path := filepath.Join(t.TempDir(), "container_tokens")
			b, err := creds.Marshal(token.FormatWritable)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			read, err := ReadCredentialsFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AMRMToken(read)
			if (err != nil) != tt.wantErr {
				t.Fatalf("AMRMToken: %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !got.Equal(amrm) {
				t.Errorf("AMRMToken = %v, want %v", got, amrm)
			}
		})
	}
}
