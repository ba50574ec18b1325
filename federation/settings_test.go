package federation

import (
	"testing"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

func conf(props map[string]string) *hadoopconf.Configuration {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	for k, v := range props {
		c.Set(k, v)
	}
	return c
}

func TestSettingsDefaultToYARNs(t *testing.T) {
	s, err := LoadSettings(conf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		HeartbeatInterval: time.Minute, HeartbeatInitialDelay: 30 * time.Second, CacheTTL: 5 * time.Minute,
		PolicyManager: UniformBroadcastPolicyManager, RouterClientRMAddress: "0.0.0.0:8050", RouterRMAdminAddress: "0.0.0.0:8052", AdminACL: "*", RouterWebappAddress: "0.0.0.0:8089",
		SubmitRetry: 3, SubmitInterval: 10 * time.Millisecond,
		DeregisterSubClusters: true, SubClusterExpiration: 30 * time.Minute, SubClusterCleanerInterval: time.Minute,
	}
	if s != want {
		t.Errorf("defaults\n got %+v\nwant %+v", s, want)
	}
}

func TestSettingsReadTheSiteInYARNsUnits(t *testing.T) {
	s, err := LoadSettings(conf(map[string]string{
		hadoopconf.KeyFederationEnabled:                   "true",
		hadoopconf.KeyRMClusterID:                         " sc1 ",
		hadoopconf.KeyFederationHeartbeatInterval:         "5",
		hadoopconf.KeyFederationHeartbeatInitialDelay:     "2s",
		hadoopconf.KeyFederationCacheTTL:                  "0",
		hadoopconf.KeyRouterSubClusterHeartbeatExpiration: "10s",
		hadoopconf.KeyRouterSubmitRetry:                   "0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled || s.SubClusterID != "sc1" || s.HeartbeatInterval != 5*time.Second || s.HeartbeatInitialDelay != 2*time.Second ||
		s.CacheTTL != 0 || s.SubClusterExpiration != 10*time.Second || s.SubmitRetry != 1 {
		t.Errorf("settings %+v", s)
	}
	// A heartbeat interval of zero or less means the default, as YARN reads it.
	s, err = LoadSettings(conf(map[string]string{hadoopconf.KeyFederationHeartbeatInterval: "-1"}))
	if err != nil || s.HeartbeatInterval != time.Minute {
		t.Errorf("interval -1: %v, %v", s.HeartbeatInterval, err)
	}
	if _, err := LoadSettings(conf(map[string]string{hadoopconf.KeyFederationCacheTTL: "soon"})); err == nil {
		t.Error("a TTL of \"soon\" was accepted")
	}
}
