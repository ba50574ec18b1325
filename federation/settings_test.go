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
		AMRMProxyHeartbeatMaxWait: 5 * time.Second, AMRMProxySubClusterTimeout: time.Minute,
		DelegationKeyUpdateInterval: 24 * time.Hour, DelegationTokenMaxLifetime: 7 * 24 * time.Hour,
		DelegationTokenRenewInterval: 24 * time.Hour, DelegationTokenRemoveScanInterval: time.Hour,
	}
	if s != want {
		t.Errorf("defaults\n got %+v\nwant %+v", s, want)
	}
}

func TestSettingsReadTheSiteInYARNsUnits(t *testing.T) {
	s, err := LoadSettings(conf(map[string]string{
		hadoopconf.KeyFederationEnabled:                    "true",
		hadoopconf.KeyRMClusterID:                          " sc1 ",
		hadoopconf.KeyFederationHeartbeatInterval:          "5",
		hadoopconf.KeyFederationHeartbeatInitialDelay:      "2s",
		hadoopconf.KeyFederationCacheTTL:                   "0",
		hadoopconf.KeyRouterSubClusterHeartbeatExpiration:  "10s",
		hadoopconf.KeyRouterSubmitRetry:                    "0",
		hadoopconf.KeyFederationMachineList:                " machines.txt ",
		hadoopconf.KeyFederationAMRMProxyHBMaxWait:         "250",
		hadoopconf.KeyFederationAMRMProxySubClusterTimeout: "0",
		hadoopconf.KeyDelegationKeyUpdateInterval:          "60000",
		hadoopconf.KeyDelegationTokenMaxLifetime:           "3600000",
		hadoopconf.KeyDelegationTokenRenewInterval:         "2m",
		hadoopconf.KeyDelegationTokenRemoveScanInterval:    "1000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled || s.SubClusterID != "sc1" || s.HeartbeatInterval != 5*time.Second || s.HeartbeatInitialDelay != 2*time.Second ||
		s.CacheTTL != 0 || s.SubClusterExpiration != 10*time.Second || s.SubmitRetry != 1 || s.MachineList != "machines.txt" ||
		s.AMRMProxyHeartbeatMaxWait != 250*time.Millisecond || s.AMRMProxySubClusterTimeout != time.Minute ||
		s.DelegationKeyUpdateInterval != time.Minute || s.DelegationTokenMaxLifetime != time.Hour ||
		s.DelegationTokenRenewInterval != 2*time.Minute || s.DelegationTokenRemoveScanInterval != time.Second {
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
	// YARN reads the AMRMProxy's two with getLong: a unit is refused.
	if _, err := LoadSettings(conf(map[string]string{hadoopconf.KeyFederationAMRMProxyHBMaxWait: "5s"})); err == nil {
		t.Error("a heartbeat wait of \"5s\" was accepted")
	}
}

func TestGPGSettingsDefaultToYARNs(t *testing.T) {
	s, err := LoadGPGSettings(conf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.PolicyClass != NoOpGlobalPolicy || s.Interval != time.Hour || s.MinPending != 100 || s.MaxPending != 1000 || s.MinWeight != 0 ||
		s.MaxEdit != 3 || s.Scaling != ScalingLinear || s.SubClusterCleanerInterval > 0 || s.SubClusterExpiration != 30*time.Minute {
		t.Errorf("defaults %+v", s)
	}
}

func TestGPGSettingsRefuseWhatLoadBasedGlobalPolicyRefuses(t *testing.T) {
	tests := []struct {
		name  string
		props map[string]string
	}{
		{"minimum pending over the maximum", map[string]string{hadoopconf.KeyGPGLoadBasedMinPending: "10", hadoopconf.KeyGPGLoadBasedMaxPending: "5"}},
		{"minimum weight of 1", map[string]string{hadoopconf.KeyGPGLoadBasedMinWeight: "1"}},
		{"negative minimum weight", map[string]string{hadoopconf.KeyGPGLoadBasedMinWeight: "-0.1"}},
		{"a global policy knit-gpg lacks", map[string]string{hadoopconf.KeyGPGPolicyClass: "org.example.MyGlobalPolicy"}},
		{"an interval of zero", map[string]string{hadoopconf.KeyGPGPolicyInterval: "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := LoadGPGSettings(conf(tt.props)); err == nil {
				t.Errorf("accepted: %+v", s)
			}
		})
	}
	// An unknown scaling is NONE, as LoadBasedGlobalPolicy warns and keeps it.
	s, err := LoadGPGSettings(conf(map[string]string{hadoopconf.KeyGPGLoadBasedScaling: "CUBIC", hadoopconf.KeyGPGPolicyInterval: "5s"}))
	if err != nil || s.Scaling != ScalingNone || s.Interval != 5*time.Second {
		t.Errorf("settings %+v, %v", s, err)
	}
}
