package hadoopconf

// Property names of the ResourceManager settings, as in yarn-default.xml.
// Clients read the addresses; the RM reads them all (rm/conf.RMSettings).
const (
	KeyRMHostname                        = "yarn.resourcemanager.hostname"
	KeyRMAddress                         = "yarn.resourcemanager.address"
	KeyRMSchedulerAddress                = "yarn.resourcemanager.scheduler.address"
	KeyRMAdminAddress                    = "yarn.resourcemanager.admin.address"
	KeyRMWebappAddress                   = "yarn.resourcemanager.webapp.address"
	KeyRMClusterID                       = "yarn.resourcemanager.cluster-id"
	KeyRMEpoch                           = "yarn.resourcemanager.epoch"
	KeyRMEpochRange                      = "yarn.resourcemanager.epoch.range"
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

// YarnDefaults returns the yarn-default.xml properties behind the ResourceManager settings, to
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
