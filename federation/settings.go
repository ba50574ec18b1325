package federation

import (
	"errors"
	"fmt"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// The policy managers' Java class names, as a policy's type and
// yarn.federation.policy-manager name them.
const (
	managerPackage = "org.apache.hadoop.yarn.server.federation.policies.manager."
	// UniformBroadcastPolicyManager routes by UniformRandomRouterPolicy;
	// YARN's default.
	UniformBroadcastPolicyManager = managerPackage + "UniformBroadcastPolicyManager"
	// HomePolicyManager routes by UniformRandomRouterPolicy too.
	HomePolicyManager = managerPackage + "HomePolicyManager"
	// WeightedHomePolicyManager routes by WeightedRandomRouterPolicy.
	WeightedHomePolicyManager = managerPackage + "WeightedHomePolicyManager"
	// PriorityBroadcastPolicyManager routes by PriorityRouterPolicy.
	PriorityBroadcastPolicyManager = managerPackage + "PriorityBroadcastPolicyManager"
	// HashBroadcastPolicyManager routes by HashBasedRouterPolicy.
	HashBroadcastPolicyManager = managerPackage + "HashBroadcastPolicyManager"
	// RejectAllPolicyManager routes by RejectRouterPolicy.
	RejectAllPolicyManager = managerPackage + "RejectAllPolicyManager"
	// LoadBasedPolicyManager routes by LoadBasedRouterPolicy. YARN ships
	// that policy without a manager, so the name is Knit's own, in a
	// package of its own, so that no one takes it for a YARN class: a YARN
	// Router reading the store refuses it rather than misroute.
	LoadBasedPolicyManager = "io.knit.federation.policies.manager.LoadBasedPolicyManager"
)

// DefaultPolicyQueue is the queue whose policy serves every queue without
// one of its own (YarnConfiguration.DEFAULT_FEDERATION_POLICY_KEY).
const DefaultPolicyQueue = "*"

// Settings are the yarn-site.xml settings of YARN Federation, with
// YarnConfiguration's defaults.
type Settings struct {
	// Enabled is yarn.federation.enabled: a knit-rm joins the federation.
	Enabled bool
	// SubClusterID is yarn.resourcemanager.cluster-id, the RM's sub-cluster.
	SubClusterID string
	// HeartbeatInterval is how often an RM heartbeats (60 s); a value of
	// zero or less means the default, as FederationStateStoreService reads it.
	HeartbeatInterval time.Duration
	// HeartbeatInitialDelay is the wait before the first heartbeat (30 s).
	HeartbeatInitialDelay time.Duration
	// CacheTTL is how long the Router keeps what it read of the store
	// (300 s); zero turns its cache off.
	CacheTTL time.Duration
	// PolicyManager and PolicyManagerParams are the policy of queues with
	// none in the store, "*" included.
	PolicyManager       string
	PolicyManagerParams string
	// RouterClientRMAddress is where the Router serves
	// ApplicationClientProtocol (0.0.0.0:8050); RouterRMAdminAddress its
	// admin protocol (0.0.0.0:8052), to callers on AdminACL (yarn.admin.acl).
	RouterClientRMAddress string
	RouterRMAdminAddress  string
	AdminACL              string
	// RouterWebappAddress is where the Router serves the federation's REST
	// API and web page (0.0.0.0:8089).
	RouterWebappAddress string
	// SubmitRetry is how many sub-clusters a submission and a new
	// application id are tried on (3); SubmitInterval the pause between.
	SubmitRetry    int
	SubmitInterval time.Duration
	// DeregisterSubClusters turns on the Router's check that marks
	// sub-clusters LOST once silent for SubClusterExpiration (30 min),
	// run every SubClusterCleanerInterval (60 s).
	DeregisterSubClusters     bool
	SubClusterExpiration      time.Duration
	SubClusterCleanerInterval time.Duration
	// MachineList is yarn.federation.machine-list, the file that puts
	// nodes and racks in sub-clusters for the locality policies (none).
	MachineList string
	// AMRMProxyHeartbeatMaxWait bounds the AMRMProxy's wait for the first
	// sub-cluster's answer to an AM's heartbeat (5 s);
	// AMRMProxySubClusterTimeout is how long a sub-cluster may go without
	// answering before no new asks go to it (a minute; zero or less means
	// that default, as FederationInterceptor reads it). Both are read in
	// whole milliseconds, as YARN's getLong reads them.
	AMRMProxyHeartbeatMaxWait  time.Duration
	AMRMProxySubClusterTimeout time.Duration
	// The Router's delegation token schedule, read from the RM's keys as
	// YARN's Router reads them (RouterClientRMService): a new master key
	// every DelegationKeyUpdateInterval
	// (yarn.resourcemanager.delegation.key.update-interval, 1 day), a
	// token good for DelegationTokenMaxLifetime however often renewed
	// (...token.max-lifetime, 7 days), a renewal good for
	// DelegationTokenRenewInterval (...token.renew-interval, 1 day), and
	// expired tokens and keys dropped every
	// DelegationTokenRemoveScanInterval (...token.remove-scan-interval,
	// 1 hour), all in milliseconds; zero or less means the default.
	DelegationKeyUpdateInterval       time.Duration
	DelegationTokenMaxLifetime        time.Duration
	DelegationTokenRenewInterval      time.Duration
	DelegationTokenRemoveScanInterval time.Duration
}

// LoadSettings reads the federation settings of c, YARN's defaults under
// them.
func LoadSettings(c *hadoopconf.Configuration) (Settings, error) {
	var (
		s    Settings
		errs []error
		err  error
	)
	get := func(dst *time.Duration, key string, def, unit time.Duration) {
		*dst, err = c.GetDuration(key, def, unit)
		errs = append(errs, err)
	}
	s.Enabled, err = c.GetBool(hadoopconf.KeyFederationEnabled, false)
	errs = append(errs, err)
	s.SubClusterID, err = c.GetTrimmed(hadoopconf.KeyRMClusterID, "")
	errs = append(errs, err)
	get(&s.HeartbeatInterval, hadoopconf.KeyFederationHeartbeatInterval, 60*time.Second, time.Second)
	if s.HeartbeatInterval <= 0 {
		s.HeartbeatInterval = 60 * time.Second
	}
	get(&s.HeartbeatInitialDelay, hadoopconf.KeyFederationHeartbeatInitialDelay, 30*time.Second, time.Second)
	if s.HeartbeatInitialDelay <= 0 {
		s.HeartbeatInitialDelay = 30 * time.Second
	}
	get(&s.CacheTTL, hadoopconf.KeyFederationCacheTTL, 300*time.Second, time.Second)
	s.PolicyManager, err = c.GetTrimmed(hadoopconf.KeyFederationPolicyManager, UniformBroadcastPolicyManager)
	errs = append(errs, err)
	s.PolicyManagerParams, err = c.GetTrimmed(hadoopconf.KeyFederationPolicyManagerParams, "")
	errs = append(errs, err)
	s.RouterClientRMAddress, err = c.GetTrimmed(hadoopconf.KeyRouterClientRMAddress, "0.0.0.0:8050")
	errs = append(errs, err)
	s.RouterRMAdminAddress, err = c.GetTrimmed(hadoopconf.KeyRouterRMAdminAddress, "0.0.0.0:8052")
	errs = append(errs, err)
	s.RouterWebappAddress, err = c.GetTrimmed(hadoopconf.KeyRouterWebappAddress, "0.0.0.0:8089")
	errs = append(errs, err)
	// ACL strings are not trimmed: " " (nobody) differs from "" (unset).
	s.AdminACL, err = c.Get(hadoopconf.KeyAdminACL, "*")
	errs = append(errs, err)
	s.SubmitRetry, err = c.GetInt(hadoopconf.KeyRouterSubmitRetry, 3)
	errs = append(errs, err)
	get(&s.SubmitInterval, hadoopconf.KeyRouterSubmitInterval, 10*time.Millisecond, time.Millisecond)
	s.DeregisterSubClusters, err = c.GetBool(hadoopconf.KeyRouterDeregisterSubClusterEnabled, true)
	errs = append(errs, err)
	get(&s.SubClusterExpiration, hadoopconf.KeyRouterSubClusterHeartbeatExpiration, 30*time.Minute, time.Millisecond)
	get(&s.SubClusterCleanerInterval, hadoopconf.KeyRouterSubClusterCleanerInterval, 60*time.Second, time.Millisecond)
	s.MachineList, err = c.GetTrimmed(hadoopconf.KeyFederationMachineList, "")
	errs = append(errs, err)
	millis := func(dst *time.Duration, key string, def int64) {
		var ms int64
		ms, err = c.GetInt64(key, def)
		errs = append(errs, err)
		*dst = time.Duration(ms) * time.Millisecond
	}
	millis(&s.AMRMProxyHeartbeatMaxWait, hadoopconf.KeyFederationAMRMProxyHBMaxWait, 5000)
	millis(&s.AMRMProxySubClusterTimeout, hadoopconf.KeyFederationAMRMProxySubClusterTimeout, 60000)
	if s.AMRMProxySubClusterTimeout <= 0 {
		s.AMRMProxySubClusterTimeout = time.Minute
	}
	for _, d := range []struct {
		dst *time.Duration
		key string
		def time.Duration
	}{
		{&s.DelegationKeyUpdateInterval, hadoopconf.KeyDelegationKeyUpdateInterval, 24 * time.Hour},
		{&s.DelegationTokenMaxLifetime, hadoopconf.KeyDelegationTokenMaxLifetime, 7 * 24 * time.Hour},
		{&s.DelegationTokenRenewInterval, hadoopconf.KeyDelegationTokenRenewInterval, 24 * time.Hour},
		{&s.DelegationTokenRemoveScanInterval, hadoopconf.KeyDelegationTokenRemoveScanInterval, time.Hour},
	} {
		// Zero or less would expire every token at once or stop the
		// roll's ticker: it means the default.
		if get(d.dst, d.key, d.def, time.Millisecond); *d.dst <= 0 {
			*d.dst = d.def
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, fmt.Errorf("federation settings: %w", err)
	}
	if s.SubmitRetry < 1 {
		s.SubmitRetry = 1
	}
	return s, nil
}

// The global policies' Java class names, as
// yarn.federation.gpg.policy.generator.class names them.
const (
	gpgPolicyPackage = "org.apache.hadoop.yarn.server.globalpolicygenerator.policygenerator."
	// NoOpGlobalPolicy writes nothing; YARN's default.
	NoOpGlobalPolicy = gpgPolicyPackage + "NoOpGlobalPolicy"
	// LoadBasedGlobalPolicy weighs sub-clusters down by their pending
	// applications.
	LoadBasedGlobalPolicy = gpgPolicyPackage + "LoadBasedGlobalPolicy"
)

// Scaling is how LoadBasedGlobalPolicy maps pending applications to a
// weight (its Scaling enum).
type Scaling string

const (
	ScalingLinear    Scaling = "LINEAR"
	ScalingQuadratic Scaling = "QUADRATIC"
	ScalingLog       Scaling = "LOG"
	ScalingNone      Scaling = "NONE"
)

// GPGSettings are the yarn-site.xml settings of the global policy
// generator, with YarnConfiguration's defaults.
type GPGSettings struct {
	// PolicyClass is the global policy: NoOpGlobalPolicy (the default,
	// which runs no generator) or LoadBasedGlobalPolicy.
	PolicyClass string
	// Interval is how often the generator runs (1 h).
	Interval time.Duration
	// Blacklist are sub-clusters the generator weighs not at all.
	Blacklist []string
	// MinPending (100), MaxPending (1000), MinWeight (0), MaxEdit (3) and
	// Scaling (LINEAR) are LoadBasedGlobalPolicy's: at most MaxEdit of the
	// most loaded sub-clusters with more than MinPending pending
	// applications are weighed down, to MinWeight at MaxPending.
	MinPending, MaxPending int
	MinWeight              float32
	MaxEdit                int
	Scaling                Scaling
	// SubClusterCleanerInterval turns on the GPG's marking of sub-clusters
	// silent for SubClusterExpiration (30 min) LOST when above zero (off
	// by default, as in YARN).
	SubClusterCleanerInterval time.Duration
	SubClusterExpiration      time.Duration
}

// LoadGPGSettings reads the global policy generator's settings of c,
// refusing what LoadBasedGlobalPolicy refuses.
func LoadGPGSettings(c *hadoopconf.Configuration) (GPGSettings, error) {
	var (
		s    GPGSettings
		errs []error
		err  error
	)
	s.PolicyClass, err = c.GetTrimmed(hadoopconf.KeyGPGPolicyClass, NoOpGlobalPolicy)
	errs = append(errs, err)
	s.Interval, err = c.GetDuration(hadoopconf.KeyGPGPolicyInterval, time.Hour, time.Millisecond)
	errs = append(errs, err)
	s.Blacklist, err = c.GetStrings(hadoopconf.KeyGPGPolicyBlacklist, nil)
	errs = append(errs, err)
	s.MinPending, err = c.GetInt(hadoopconf.KeyGPGLoadBasedMinPending, 100)
	errs = append(errs, err)
	s.MaxPending, err = c.GetInt(hadoopconf.KeyGPGLoadBasedMaxPending, 1000)
	errs = append(errs, err)
	s.MinWeight, err = c.GetFloat(hadoopconf.KeyGPGLoadBasedMinWeight, 0)
	errs = append(errs, err)
	s.MaxEdit, err = c.GetInt(hadoopconf.KeyGPGLoadBasedMaxEdit, 3)
	errs = append(errs, err)
	scaling, err := c.GetTrimmed(hadoopconf.KeyGPGLoadBasedScaling, string(ScalingLinear))
	errs = append(errs, err)
	s.Scaling = Scaling(scaling)
	s.SubClusterCleanerInterval, err = c.GetDuration(hadoopconf.KeyGPGSubClusterCleanerInterval, -1, time.Millisecond)
	errs = append(errs, err)
	s.SubClusterExpiration, err = c.GetDuration(hadoopconf.KeyGPGSubClusterHeartbeatExpiration, 30*time.Minute, time.Millisecond)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return GPGSettings{}, fmt.Errorf("global policy generator settings: %w", err)
	}
	switch {
	case s.PolicyClass != NoOpGlobalPolicy && s.PolicyClass != LoadBasedGlobalPolicy:
		return GPGSettings{}, fmt.Errorf("%s: global policy %s is not supported by knit-gpg (supported: %s, %s)",
			hadoopconf.KeyGPGPolicyClass, s.PolicyClass, NoOpGlobalPolicy, LoadBasedGlobalPolicy)
	case s.MinPending > s.MaxPending:
		return GPGSettings{}, fmt.Errorf("minPending = %d must be less than or equal to maxPending=%d", s.MinPending, s.MaxPending)
	case s.MinWeight < 0 || s.MinWeight >= 1:
		return GPGSettings{}, fmt.Errorf("minWeight = %v must be within range [0,1)", s.MinWeight)
	case s.Interval <= 0:
		return GPGSettings{}, fmt.Errorf("%s must be positive, not %v", hadoopconf.KeyGPGPolicyInterval, s.Interval)
	}
	switch s.Scaling {
	case ScalingLinear, ScalingQuadratic, ScalingLog, ScalingNone:
	default:
		// LoadBasedGlobalPolicy warns and keeps NONE.
		s.Scaling = ScalingNone
	}
	return s, nil
}
