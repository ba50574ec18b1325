package conf

import (
	"errors"
	"fmt"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// ErrInvalidSettings means the ResourceManager settings are inconsistent in a
// way Hadoop's ResourceManager refuses to start with.
var ErrInvalidSettings = errors.New("invalid ResourceManager settings")

// RMSettings are the yarn-site.xml settings Knit's ResourceManager reads.
type RMSettings struct {
	// Hostname is yarn.resourcemanager.hostname; the four addresses default
	// to it with YARN's ports.
	Hostname string
	// Address serves ApplicationClientProtocol (default port 8032).
	Address string
	// SchedulerAddress serves ApplicationMasterProtocol (8030).
	SchedulerAddress string
	// AdminAddress serves ResourceManagerAdministrationProtocol (8033).
	AdminAddress string
	// WebappAddress serves the REST API and web UI (8088).
	WebappAddress string
	// ClusterID names the cluster in HA and in RM delegation tokens; empty
	// when unset, as YARN has no default.
	ClusterID string
	// EpochSeed (yarn.resourcemanager.epoch) is added to the RM's epoch in
	// the container ids it gives out, and EpochRange
	// (yarn.resourcemanager.epoch.range, 0 for none) is where the epoch
	// wraps above the seed: the sub-clusters of a federation, whose
	// container ids of one application must never meet, get seeds far
	// apart (YARN's Federation guide says 1000 apart).
	EpochSeed, EpochRange int64
	// MaxCompletedApplications is how many finished applications are kept.
	MaxCompletedApplications int
	// AMMaxAttempts is the cluster's cap on an application's attempts.
	AMMaxAttempts int
	// ACLEnable turns on queue, application and admin ACL checks.
	ACLEnable bool
	// AdminACL is yarn.admin.acl in AccessControlList syntax.
	AdminACL string
	// LogAggregationEnable is yarn.log-aggregation-enable: reports show
	// the nodes' log aggregation status instead of DISABLED.
	LogAggregationEnable bool
	// LogAggregationStatusTimeout is yarn.log-aggregation-status.time-out.ms:
	// how long after an application ends its aggregation may run before
	// reports say TIME_OUT.
	LogAggregationStatusTimeout time.Duration
	// MaxApplicationPriority is the highest priority an application gets;
	// higher ones are lowered to it.
	MaxApplicationPriority int
	// MinAllocationMB and MaxAllocationMB bound a container's memory.
	MinAllocationMB, MaxAllocationMB int
	// MinAllocationVcores and MaxAllocationVcores bound its vcores.
	MinAllocationVcores, MaxAllocationVcores int
	// AMExpiry is how long an AM may go without heartbeating.
	AMExpiry time.Duration
	// NMExpiry is a NodeManager's liveness timeout; Knit has no NodeManagers
	// but YARN bounds the container and NM token rolling with it.
	NMExpiry time.Duration
	// ContainerAllocationExpiry is how long an allocated container may stay
	// unstarted before it is taken back.
	ContainerAllocationExpiry time.Duration
	// AppTimeoutsMonitorInterval is how often application lifetimes are
	// checked.
	AppTimeoutsMonitorInterval time.Duration
	// DelegationKeyUpdateInterval rolls the RM delegation-token master key.
	DelegationKeyUpdateInterval time.Duration
	// DelegationTokenRenewInterval is how long a renewal lasts.
	DelegationTokenRenewInterval time.Duration
	// DelegationTokenMaxLifetime is a delegation token's hard limit.
	DelegationTokenMaxLifetime time.Duration
	// DelegationTokenRemoveScanInterval is how often expired tokens go.
	DelegationTokenRemoveScanInterval time.Duration
	// AMRMTokenRollingInterval rolls the AMRMToken master key.
	AMRMTokenRollingInterval time.Duration
	// ContainerTokenRollingInterval rolls the ContainerToken master key.
	ContainerTokenRollingInterval time.Duration
	// NMTokenRollingInterval rolls the NMToken master key.
	NMTokenRollingInterval time.Duration
	// Preemption is the scheduler monitor's preemption policy.
	Preemption Preemption
}

// DefaultRMSettings returns YARN's defaults.
func DefaultRMSettings() RMSettings {
	s, err := LoadRMSettings(hadoopconf.New(hadoopconf.Options{LookupEnv: func(string) (string, bool) { return "", false }}))
	if err != nil {
		panic(fmt.Sprintf("conf: YARN's defaults do not load: %v", err)) // a bug in YarnDefaults
	}
	return s
}

// LoadRMSettings reads RMSettings from c, with YARN's defaults under it, and
// checks them as Hadoop's ResourceManager does at start. c is not modified.
func LoadRMSettings(c *hadoopconf.Configuration) (RMSettings, error) {
	d := c.Clone()
	for _, p := range hadoopconf.YarnDefaults() {
		d.SetDefault(p.Name, p.Value)
	}
	var (
		s    RMSettings
		errs []error
	)
	str := func(dst *string, key string) {
		v, err := d.GetTrimmed(key, "")
		*dst = v
		errs = append(errs, err)
	}
	num := func(dst *int, key string) {
		v, err := d.GetInt(key, 0)
		*dst = v
		errs = append(errs, err)
	}
	dur := func(dst *time.Duration, key string, unit time.Duration) {
		v, err := d.GetDuration(key, 0, unit)
		*dst = v
		errs = append(errs, err)
	}
	preemption, err := LoadPreemption(d)
	s.Preemption = preemption
	errs = append(errs, err)
	str(&s.Hostname, hadoopconf.KeyRMHostname)
	str(&s.Address, hadoopconf.KeyRMAddress)
	str(&s.SchedulerAddress, hadoopconf.KeyRMSchedulerAddress)
	str(&s.AdminAddress, hadoopconf.KeyRMAdminAddress)
	str(&s.WebappAddress, hadoopconf.KeyRMWebappAddress)
	str(&s.ClusterID, hadoopconf.KeyRMClusterID)
	s.EpochSeed, err = d.GetInt64(hadoopconf.KeyRMEpoch, 0)
	errs = append(errs, err)
	s.EpochRange, err = d.GetInt64(hadoopconf.KeyRMEpochRange, 0)
	errs = append(errs, err)
	num(&s.MaxCompletedApplications, hadoopconf.KeyRMMaxCompletedApplications)
	num(&s.AMMaxAttempts, hadoopconf.KeyRMAMMaxAttempts)
	acl, err := d.GetBool(hadoopconf.KeyACLEnable, false)
	s.ACLEnable = acl
	errs = append(errs, err)
	s.LogAggregationEnable, err = d.GetBool("yarn.log-aggregation-enable", false)
	errs = append(errs, err)
	s.LogAggregationStatusTimeout, err = d.GetDuration("yarn.log-aggregation-status.time-out.ms", 10*time.Minute, time.Millisecond)
	errs = append(errs, err)
	// ACL strings are not trimmed: " " (nobody) differs from "" (unset).
	s.AdminACL, err = d.Get(hadoopconf.KeyAdminACL, "*")
	errs = append(errs, err)
	num(&s.MaxApplicationPriority, hadoopconf.KeyClusterMaxApplicationPriority)
	num(&s.MinAllocationMB, hadoopconf.KeySchedulerMinAllocationMB)
	num(&s.MaxAllocationMB, hadoopconf.KeySchedulerMaxAllocationMB)
	num(&s.MinAllocationVcores, hadoopconf.KeySchedulerMinAllocationVcores)
	num(&s.MaxAllocationVcores, hadoopconf.KeySchedulerMaxAllocationVcores)
	dur(&s.AMExpiry, hadoopconf.KeyAMExpiryInterval, time.Millisecond)
	dur(&s.NMExpiry, hadoopconf.KeyNMExpiryInterval, time.Millisecond)
	dur(&s.ContainerAllocationExpiry, hadoopconf.KeyContainerAllocationExpiry, time.Millisecond)
	dur(&s.AppTimeoutsMonitorInterval, hadoopconf.KeyAppTimeoutsMonitorInterval, time.Millisecond)
	dur(&s.DelegationKeyUpdateInterval, hadoopconf.KeyDelegationKeyUpdateInterval, time.Millisecond)
	dur(&s.DelegationTokenRenewInterval, hadoopconf.KeyDelegationTokenRenewInterval, time.Millisecond)
	dur(&s.DelegationTokenMaxLifetime, hadoopconf.KeyDelegationTokenMaxLifetime, time.Millisecond)
	dur(&s.DelegationTokenRemoveScanInterval, hadoopconf.KeyDelegationTokenRemoveScanInterval, time.Millisecond)
	dur(&s.AMRMTokenRollingInterval, hadoopconf.KeyAMRMTokenRollingInterval, time.Second)
	dur(&s.ContainerTokenRollingInterval, hadoopconf.KeyContainerTokenRollingInterval, time.Second)
	dur(&s.NMTokenRollingInterval, hadoopconf.KeyNMTokenRollingInterval, time.Second)
	if err := errors.Join(errs...); err != nil {
		return RMSettings{}, fmt.Errorf("ResourceManager settings: %w", err)
	}
	if err := s.Validate(); err != nil {
		return RMSettings{}, err
	}
	return s, nil
}

// maxContainerEpoch is the largest epoch a container id holds (the bits
// above its 40-bit sequence, less the sign).
const maxContainerEpoch = 1<<23 - 1

// ContainerEpoch is the epoch of the container ids of the RM's term-th
// leadership (rm/store.Store.NextEpoch): the seed plus the term, wrapped
// within the range above the seed when there is one, as YARN's state
// stores count it.
func (s RMSettings) ContainerEpoch(term int64) int64 {
	if s.EpochRange > 0 {
		term %= s.EpochRange
	}
	return (s.EpochSeed + term) & maxContainerEpoch
}

// Validate checks the settings as Hadoop's ResourceManager, scheduler and
// token secret managers do when they start, with their messages. The error
// wraps ErrInvalidSettings.
func (s RMSettings) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSettings}, args...)...))
	}
	if s.EpochSeed < 0 || s.EpochSeed > maxContainerEpoch || s.EpochRange < 0 {
		bad("%s=%d and %s=%d must be from 0, the seed at most %d", hadoopconf.KeyRMEpoch, s.EpochSeed, hadoopconf.KeyRMEpochRange, s.EpochRange, maxContainerEpoch)
	}
	if s.AMMaxAttempts <= 0 {
		bad("Invalid global max attempts configuration, %s=%d, it should be a positive integer.",
			hadoopconf.KeyRMAMMaxAttempts, s.AMMaxAttempts)
	}
	if s.MinAllocationMB <= 0 || s.MinAllocationMB > s.MaxAllocationMB {
		bad("Invalid resource scheduler memory allocation configuration, %s=%d, %s=%d, min and max should be greater than 0, max should be no smaller than min.",
			hadoopconf.KeySchedulerMinAllocationMB, s.MinAllocationMB, hadoopconf.KeySchedulerMaxAllocationMB, s.MaxAllocationMB)
	}
	if s.MinAllocationVcores <= 0 || s.MinAllocationVcores > s.MaxAllocationVcores {
		bad("Invalid resource scheduler vcores allocation configuration, %s=%d, %s=%d, min and max should be greater than 0, max should be no smaller than min.",
			hadoopconf.KeySchedulerMinAllocationVcores, s.MinAllocationVcores, hadoopconf.KeySchedulerMaxAllocationVcores, s.MaxAllocationVcores)
	}
	// A key must outlive its activation delay (1.5 x the liveness timeout)
	// twice over, or holders of the old key are cut off.
	rolling := []struct {
		key, expiryKey   string
		interval, expiry time.Duration
	}{
		{hadoopconf.KeyAMRMTokenRollingInterval, hadoopconf.KeyAMExpiryInterval, s.AMRMTokenRollingInterval, s.AMExpiry},
		{hadoopconf.KeyContainerTokenRollingInterval, hadoopconf.KeyNMExpiryInterval, s.ContainerTokenRollingInterval, s.NMExpiry},
		{hadoopconf.KeyNMTokenRollingInterval, hadoopconf.KeyNMExpiryInterval, s.NMTokenRollingInterval, s.NMExpiry},
	}
	for _, r := range rolling {
		activation := time.Duration(float64(r.expiry.Milliseconds())*1.5) * time.Millisecond
		if r.interval <= 2*activation {
			bad("%s should be more than 3 X %s", r.key, r.expiryKey)
		}
	}
	return errors.Join(errs...)
}
