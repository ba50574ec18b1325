package hadoopconf

// Property names of YARN Federation, as in YarnConfiguration: the
// sub-cluster RMs read the yarn.federation.* membership ones, knit-router
// the rest (federation.LoadSettings).
const (
	KeyFederationEnabled                    = "yarn.federation.enabled"
	KeyFederationHeartbeatInterval          = "yarn.federation.state-store.heartbeat-interval-secs"
	KeyFederationHeartbeatInitialDelay      = "yarn.federation.state-store.heartbeat.initial-delay"
	KeyFederationCacheTTL                   = "yarn.federation.cache-ttl.secs"
	KeyFederationPolicyManager              = "yarn.federation.policy-manager"
	KeyFederationPolicyManagerParams        = "yarn.federation.policy-manager-params"
	KeyFederationAMRMProxyHBMaxWait         = "yarn.federation.amrmproxy.hb.maximum.wait.ms"
	KeyFederationAMRMProxySubClusterTimeout = "yarn.federation.amrmproxy.subcluster.timeout.ms"
	KeyRouterClientRMAddress                = "yarn.router.clientrm.address"
	KeyRouterRMAdminAddress                 = "yarn.router.rmadmin.address"
	KeyRouterWebappAddress                  = "yarn.router.webapp.address"
	KeyRouterSubmitRetry                    = "yarn.router.submit.retry"
	KeyRouterSubmitInterval                 = "yarn.router.submit.interval.time"
	KeyRouterDeregisterSubClusterEnabled    = "yarn.router.deregister.subcluster.enabled"
	KeyRouterSubClusterHeartbeatExpiration  = "yarn.router.subcluster.heartbeat.expiration.time"
	KeyRouterSubClusterCleanerInterval      = "yarn.router.subcluster.cleaner.interval.time"

	// The global policy generator's (knit-gpg, federation.LoadGPGSettings).
	KeyGPGPolicyClass                   = "yarn.federation.gpg.policy.generator.class"
	KeyGPGPolicyInterval                = "yarn.federation.gpg.policy.generator.interval"
	KeyGPGPolicyBlacklist               = "yarn.federation.gpg.policy.generator.blacklist"
	KeyGPGLoadBasedMinPending           = "yarn.federation.gpg.policy.generator.load-based.pending.minimum"
	KeyGPGLoadBasedMaxPending           = "yarn.federation.gpg.policy.generator.load-based.pending.maximum"
	KeyGPGLoadBasedMinWeight            = "yarn.federation.gpg.policy.generator.load-based.weight.minimum"
	KeyGPGLoadBasedMaxEdit              = "yarn.federation.gpg.policy.generator.load-based.edit.maximum"
	KeyGPGLoadBasedScaling              = "yarn.federation.gpg.policy.generator.load-based.scaling"
	KeyGPGSubClusterCleanerInterval     = "yarn.federation.gpg.subcluster.cleaner.interval-ms"
	KeyGPGSubClusterHeartbeatExpiration = "yarn.federation.gpg.subcluster.heartbeat.expiration-ms"
)
