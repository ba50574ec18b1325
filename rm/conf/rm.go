package conf

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidSettings means the ResourceManager settings are inconsistent in a
// way Hadoop's ResourceManager refuses to start with.
var ErrInvalidSettings = errors.New("invalid ResourceManager settings")

// Property names of the settings in RMSettings, as in yarn-default.xml.
const (
	KeyRMHostname                        = "yarn.resourcemanager.hostname"
	KeyRMAddress                         = "yarn.resourcemanager.address"
	KeyRMSchedulerAddress                = "yarn.resourcemanager.scheduler.address"
	KeyRMAdminAddress                    = "yarn.resourcemanager.admin.address"
	KeyRMWebappAddress                   = "yarn.resourcemanager.webapp.address"
	KeyRMClusterID                       = "yarn.resourcemanager.cluster-id"
	KeyRMMaxCompletedApplications        = "yarn.resourcemanager.max-completed-applications"
	KeyRMAMMaxAttempts                   = "yarn.resourcemanager.am.max-attempts"
	KeyACLEnable                         = "yarn.acl.enable"
	KeyAdminACL                          = "yarn.admin.acl"
	KeyClusterMaxApplicationPriority     = "yarn.cluster.max-application-priority"
	KeySchedulerMinAllocationMB          = "yarn.scheduler.minimum-allocation-mb"
	KeySchedulerMaxAllocationMB          = "yarn.scheduler.maximum-allocation-mb"
	KeySchedulerMinAllocationVcores      = "yarn.scheduler.minimum-allocation-vcores"
	KeySchedulerMaxAllocationVcores      = "yarn.scheduler.maximum-allocation-vcores"
	KeyAMExpiryInterval                  = "yarn.am.liveness-monitor.expiry-interval-ms"
	KeyNMExpiryInterval                  = "yarn.nm.liveness-monitor.expiry-interval-ms"
	KeyContainerAllocationExpiry         = "yarn.resourcemanager.rm.container-allocation.expiry-interval-ms"
	KeyAppTimeoutsMonitorInterval        = "yarn.resourcemanager.application-timeouts.monitor.interval-ms"
	KeyDelegationKeyUpdateInterval       = "yarn.resourcemanager.delegation.key.update-interval"
	KeyDelegationTokenRenewInterval      = "yarn.resourcemanager.delegation.token.renew-interval"
	KeyDelegationTokenMaxLifetime        = "yarn.resourcemanager.delegation.token.max-lifetime"
	KeyDelegationTokenRemoveScanInterval = "yarn.resourcemanager.delegation.token.remove-scan-interval"
	KeyAMRMTokenRollingInterval          = "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs"
	KeyContainerTokenRollingInterval     = "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs"
	KeyNMTokenRollingInterval            = "yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs"
)

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
	// MaxCompletedApplications is how many finished applications are kept.
	MaxCompletedApplications int
	// AMMaxAttempts is the cluster's cap on an application's attempts.
	AMMaxAttempts int
	// ACLEnable turns on queue, application and admin ACL checks.
	ACLEnable bool
	// AdminACL is yarn.admin.acl in AccessControlList syntax.
	AdminACL string
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
}

// YarnDefaults returns the yarn-default.xml properties behind RMSettings, to
// layer under a configuration (SetDefault) or to write out. The addresses
// are written as YARN writes them, so that a yarn-site.xml setting only the
// hostname moves all four. The caller owns the returned slice.
func YarnDefaults() []Property {
	return []Property{
		{Name: KeyRMHostname, Value: "0.0.0.0"},
		{Name: KeyRMAddress, Value: "${yarn.resourcemanager.hostname}:8032"},
		{Name: KeyRMSchedulerAddress, Value: "${yarn.resourcemanager.hostname}:8030"},
		{Name: KeyRMAdminAddress, Value: "${yarn.resourcemanager.hostname}:8033"},
		{Name: KeyRMWebappAddress, Value: "${yarn.resourcemanager.hostname}:8088"},
		{Name: KeyRMMaxCompletedApplications, Value: "1000"},
		{Name: KeyRMAMMaxAttempts, Value: "2"},
		{Name: KeyACLEnable, Value: "false"},
		{Name: KeyAdminACL, Value: "*"},
		{Name: KeyClusterMaxApplicationPriority, Value: "0"},
		{Name: KeySchedulerMinAllocationMB, Value: "1024"},
		{Name: KeySchedulerMaxAllocationMB, Value: "8192"},
		{Name: KeySchedulerMinAllocationVcores, Value: "1"},
		{Name: KeySchedulerMaxAllocationVcores, Value: "4"},
		{Name: KeyAMExpiryInterval, Value: "600000"},
		{Name: KeyNMExpiryInterval, Value: "600000"},
		{Name: KeyContainerAllocationExpiry, Value: "600000"},
		{Name: KeyAppTimeoutsMonitorInterval, Value: "3000"},
		{Name: KeyDelegationKeyUpdateInterval, Value: "86400000"},
		{Name: KeyDelegationTokenRenewInterval, Value: "86400000"},
		{Name: KeyDelegationTokenMaxLifetime, Value: "604800000"},
		{Name: KeyDelegationTokenRemoveScanInterval, Value: "3600000"},
		{Name: KeyAMRMTokenRollingInterval, Value: "86400"},
		{Name: KeyContainerTokenRollingInterval, Value: "86400"},
		{Name: KeyNMTokenRollingInterval, Value: "86400"},
	}
}

// DefaultRMSettings returns YARN's defaults.
func DefaultRMSettings() RMSettings {
	s, err := LoadRMSettings(New(Options{LookupEnv: func(string) (string, bool) { return "", false }}))
	if err != nil {
		panic(fmt.Sprintf("conf: YARN's defaults do not load: %v", err)) // a bug in YarnDefaults
	}
	return s
}

// LoadRMSettings reads RMSettings from c, with YARN's defaults under it, and
// checks them as Hadoop's ResourceManager does at start. c is not modified.
func LoadRMSettings(c *Configuration) (RMSettings, error) {
	d := c.Clone()
	for _, p := range YarnDefaults() {
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
	str(&s.Hostname, KeyRMHostname)
	str(&s.Address, KeyRMAddress)
	str(&s.SchedulerAddress, KeyRMSchedulerAddress)
	str(&s.AdminAddress, KeyRMAdminAddress)
	str(&s.WebappAddress, KeyRMWebappAddress)
	str(&s.ClusterID, KeyRMClusterID)
	num(&s.MaxCompletedApplications, KeyRMMaxCompletedApplications)
	num(&s.AMMaxAttempts, KeyRMAMMaxAttempts)
	acl, err := d.GetBool(KeyACLEnable, false)
	s.ACLEnable = acl
	errs = append(errs, err)
	// ACL strings are not trimmed: " " (nobody) differs from "" (unset).
	s.AdminACL, err = d.Get(KeyAdminACL, "*")
	errs = append(errs, err)
	num(&s.MaxApplicationPriority, KeyClusterMaxApplicationPriority)
	num(&s.MinAllocationMB, KeySchedulerMinAllocationMB)
	num(&s.MaxAllocationMB, KeySchedulerMaxAllocationMB)
	num(&s.MinAllocationVcores, KeySchedulerMinAllocationVcores)
	num(&s.MaxAllocationVcores, KeySchedulerMaxAllocationVcores)
	dur(&s.AMExpiry, KeyAMExpiryInterval, time.Millisecond)
	dur(&s.NMExpiry, KeyNMExpiryInterval, time.Millisecond)
	dur(&s.ContainerAllocationExpiry, KeyContainerAllocationExpiry, time.Millisecond)
	dur(&s.AppTimeoutsMonitorInterval, KeyAppTimeoutsMonitorInterval, time.Millisecond)
	dur(&s.DelegationKeyUpdateInterval, KeyDelegationKeyUpdateInterval, time.Millisecond)
	dur(&s.DelegationTokenRenewInterval, KeyDelegationTokenRenewInterval, time.Millisecond)
	dur(&s.DelegationTokenMaxLifetime, KeyDelegationTokenMaxLifetime, time.Millisecond)
	dur(&s.DelegationTokenRemoveScanInterval, KeyDelegationTokenRemoveScanInterval, time.Millisecond)
	dur(&s.AMRMTokenRollingInterval, KeyAMRMTokenRollingInterval, time.Second)
	dur(&s.ContainerTokenRollingInterval, KeyContainerTokenRollingInterval, time.Second)
	dur(&s.NMTokenRollingInterval, KeyNMTokenRollingInterval, time.Second)
	if err := errors.Join(errs...); err != nil {
		return RMSettings{}, fmt.Errorf("ResourceManager settings: %w", err)
	}
	if err := s.Validate(); err != nil {
		return RMSettings{}, err
	}
	return s, nil
}

// Validate checks the settings as Hadoop's ResourceManager, scheduler and
// token secret managers do when they start, with their messages. The error
// wraps ErrInvalidSettings.
func (s RMSettings) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSettings}, args...)...))
	}
	if s.AMMaxAttempts <= 0 {
		bad("Invalid global max attempts configuration, %s=%d, it should be a positive integer.",
			KeyRMAMMaxAttempts, s.AMMaxAttempts)
	}
	if s.MinAllocationMB <= 0 || s.MinAllocationMB > s.MaxAllocationMB {
		bad("Invalid resource scheduler memory allocation configuration, %s=%d, %s=%d, min and max should be greater than 0, max should be no smaller than min.",
			KeySchedulerMinAllocationMB, s.MinAllocationMB, KeySchedulerMaxAllocationMB, s.MaxAllocationMB)
	}
	if s.MinAllocationVcores <= 0 || s.MinAllocationVcores > s.MaxAllocationVcores {
		bad("Invalid resource scheduler vcores allocation configuration, %s=%d, %s=%d, min and max should be greater than 0, max should be no smaller than min.",
			KeySchedulerMinAllocationVcores, s.MinAllocationVcores, KeySchedulerMaxAllocationVcores, s.MaxAllocationVcores)
	}
	// A key must outlive its activation delay (1.5 x the liveness timeout)
	// twice over, or holders of the old key are cut off.
	rolling := []struct {
		key, expiryKey   string
		interval, expiry time.Duration
	}{
		{KeyAMRMTokenRollingInterval, KeyAMExpiryInterval, s.AMRMTokenRollingInterval, s.AMExpiry},
		{KeyContainerTokenRollingInterval, KeyNMExpiryInterval, s.ContainerTokenRollingInterval, s.NMExpiry},
		{KeyNMTokenRollingInterval, KeyNMExpiryInterval, s.NMTokenRollingInterval, s.NMExpiry},
	}
	for _, r := range rolling {
		activation := time.Duration(float64(r.expiry.Milliseconds())*1.5) * time.Millisecond
		if r.interval <= 2*activation {
			bad("%s should be more than 3 X %s", r.key, r.expiryKey)
		}
	}
	return errors.Join(errs...)
}
