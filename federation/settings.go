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
	if err := errors.Join(errs...); err != nil {
		return Settings{}, fmt.Errorf("federation settings: %w", err)
	}
	if s.SubmitRetry < 1 {
		s.SubmitRetry = 1
	}
	return s, nil
}
