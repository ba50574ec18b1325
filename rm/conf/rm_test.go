package conf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// noEnv is an empty environment, so that tests never depend on the machine's.
func noEnv(string) (string, bool) { return "", false }

// siteFiles are the site files package hadoopconf's tests read too.
var siteFiles = []string{"../../hadoopconf/testdata/core-site.xml", "../../hadoopconf/testdata/yarn-site.xml"}

func TestDefaultRMSettingsAreYarns(t *testing.T) {
	want := RMSettings{
		Hostname:                          "0.0.0.0",
		Address:                           "0.0.0.0:8032",
		SchedulerAddress:                  "0.0.0.0:8030",
		AdminAddress:                      "0.0.0.0:8033",
		WebappAddress:                     "0.0.0.0:8088",
		MaxCompletedApplications:          1000,
		AMMaxAttempts:                     2,
		ACLEnable:                         false,
		AdminACL:                          "*",
		LogAggregationStatusTimeout:       10 * time.Minute,
		MinAllocationMB:                   1024,
		MaxAllocationMB:                   8192,
		MinAllocationVcores:               1,
		MaxAllocationVcores:               4,
		AMExpiry:                          10 * time.Minute,
		NMExpiry:                          10 * time.Minute,
		ContainerAllocationExpiry:         10 * time.Minute,
		AppTimeoutsMonitorInterval:        3 * time.Second,
		DelegationKeyUpdateInterval:       24 * time.Hour,
		DelegationTokenRenewInterval:      24 * time.Hour,
		DelegationTokenMaxLifetime:        7 * 24 * time.Hour,
		DelegationTokenRemoveScanInterval: time.Hour,
		AMRMTokenRollingInterval:          24 * time.Hour,
		ContainerTokenRollingInterval:     24 * time.Hour,
		NMTokenRollingInterval:            24 * time.Hour,
		Preemption: Preemption{Interval: 3 * time.Second, MaxWaitBeforeKill: 15 * time.Second,
			PerRound: f32(0.1), MaxIgnoredOverCapacity: f32(0.1), NaturalTerminationFactor: f32(0.2),
			IntraQueueMinimumThreshold: f32(0.5), IntraQueueMaxAllowableLimit: f32(0.2), IntraQueueOrderPolicy: IntraQueueUserLimitFirst},
	}
	if got := DefaultRMSettings(); got != want {
		t.Errorf("DefaultRMSettings() =\n%+v\nwant\n%+v", got, want)
	}
}

// A yarn-site.xml that sets only the hostname moves every RM address, as
// yarn-default.xml's ${yarn.resourcemanager.hostname} defaults do.
func TestRMSettingsFromSiteFiles(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	for _, f := range siteFiles {
		if err := c.AddFile(f); err != nil {
			t.Fatal(err)
		}
	}
	s, err := LoadRMSettings(c)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultRMSettings()
	want.Hostname = "rm.knit.example.com"
	want.Address = "rm.knit.example.com:8032"
	want.SchedulerAddress = "rm.knit.example.com:8030"
	want.AdminAddress = "rm.knit.example.com:8033"
	want.WebappAddress = "rm.knit.example.com:18088"
	want.ClusterID = "knit-prod"
	want.MaxCompletedApplications = 500
	want.AMMaxAttempts = 4
	want.ACLEnable = true
	want.AdminACL = "yarn admins"
	want.MaxAllocationMB = 65536
	want.MaxAllocationVcores = 32
	want.AMExpiry = 5 * time.Minute
	want.DelegationTokenMaxLifetime = 14 * 24 * time.Hour
	if s != want {
		t.Errorf("LoadRMSettings =\n%+v\nwant\n%+v", s, want)
	}
	if c.Has(hadoopconf.KeyRMAddress) {
		t.Error("LoadRMSettings added YARN's defaults to the caller's Configuration")
	}
}

// The admin ACL is kept as written: a single space means nobody, which
// trimming would turn into "unset".
func TestAdminACLIsNotTrimmed(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	c.Set(hadoopconf.KeyAdminACL, " ")
	s, err := LoadRMSettings(c)
	if err != nil || s.AdminACL != " " {
		t.Fatalf("AdminACL = %q, %v", s.AdminACL, err)
	}
}

func TestClusterMaxApplicationPriorityIsRead(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	c.Set(hadoopconf.KeyClusterMaxApplicationPriority, "10")
	s, err := LoadRMSettings(c)
	if err != nil || s.MaxApplicationPriority != 10 {
		t.Fatalf("MaxApplicationPriority = %d, %v", s.MaxApplicationPriority, err)
	}
}

func TestRMSettingsAreValidatedAsHadoopDoes(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]string
		want string
	}{
		{
			name: "max attempts must be positive",
			set:  map[string]string{hadoopconf.KeyRMAMMaxAttempts: "0"},
			want: "Invalid global max attempts configuration, yarn.resourcemanager.am.max-attempts=0, it should be a positive integer.",
		},
		{
			name: "minimum memory above maximum",
			set:  map[string]string{hadoopconf.KeySchedulerMinAllocationMB: "16384"},
			want: "Invalid resource scheduler memory allocation configuration, yarn.scheduler.minimum-allocation-mb=16384, yarn.scheduler.maximum-allocation-mb=8192, min and max should be greater than 0, max should be no smaller than min.",
		},
		{
			name: "zero minimum vcores",
			set:  map[string]string{hadoopconf.KeySchedulerMinAllocationVcores: "0"},
			want: "Invalid resource scheduler vcores allocation configuration, yarn.scheduler.minimum-allocation-vcores=0, yarn.scheduler.maximum-allocation-vcores=4, min and max should be greater than 0, max should be no smaller than min.",
		},
		{
			// 1800 s is exactly 3 x 10 minutes: not more than.
			name: "AMRMToken key rolled too often for the AM expiry",
			set:  map[string]string{hadoopconf.KeyAMRMTokenRollingInterval: "1800"},
			want: "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs should be more than 3 X yarn.am.liveness-monitor.expiry-interval-ms",
		},
		{
			name: "NMToken key rolled too often for the NM expiry",
			set:  map[string]string{hadoopconf.KeyNMExpiryInterval: "10h"},
			want: "yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs should be more than 3 X yarn.nm.liveness-monitor.expiry-interval-ms",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
			for k, v := range tt.set {
				c.Set(k, v)
			}
			_, err := LoadRMSettings(c)
			if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadRMSettings = %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

func TestRMSettingsReportUnparsableValues(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	c.Set(hadoopconf.KeyRMAMMaxAttempts, "two")
	c.Set(hadoopconf.KeyAMExpiryInterval, "ten minutes")
	_, err := LoadRMSettings(c)
	if !errors.Is(err, hadoopconf.ErrInvalidValue) {
		t.Fatalf("LoadRMSettings = %v, want hadoopconf.ErrInvalidValue", err)
	}
	for _, key := range []string{hadoopconf.KeyRMAMMaxAttempts, hadoopconf.KeyAMExpiryInterval} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
}

func TestTheContainerEpochStartsAtTheSeedAndWrapsWithinTheRange(t *testing.T) {
	tests := []struct {
		name        string
		seed, rng   string
		term, epoch int64
	}{
		{name: "without a seed the epoch is the term", term: 3, epoch: 3},
		{name: "a sub-cluster's seed sets its epochs apart", seed: "1000", term: 3, epoch: 1003},
		{name: "the range wraps the term above the seed", seed: "1000", rng: "10", term: 13, epoch: 1003},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
			if tt.seed != "" {
				c.Set(hadoopconf.KeyRMEpoch, tt.seed)
			}
			if tt.rng != "" {
				c.Set(hadoopconf.KeyRMEpochRange, tt.rng)
			}
			s, err := LoadRMSettings(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.ContainerEpoch(tt.term); got != tt.epoch {
				t.Errorf("ContainerEpoch(%d) = %d, want %d", tt.term, got, tt.epoch)
			}
		})
	}
}

func TestANegativeEpochSeedIsRefused(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: noEnv})
	c.Set(hadoopconf.KeyRMEpoch, "-1")
	if _, err := LoadRMSettings(c); !errors.Is(err, ErrInvalidSettings) {
		t.Fatalf("a seed of -1: %v, want ErrInvalidSettings", err)
	}
}
