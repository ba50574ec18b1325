package amrmproxy

import (
	"fmt"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// DefaultAddress is yarn.nodemanager.amrmproxy.address's default.
const DefaultAddress = "0.0.0.0:8049"

// Settings are the proxy's settings from the node's Hadoop configuration.
type Settings struct {
	// Enabled is yarn.nodemanager.amrmproxy.enabled.
	Enabled bool
	// Address is yarn.nodemanager.amrmproxy.address.
	Address string
	// Pipeline is yarn.nodemanager.amrmproxy.interceptor-class.pipeline,
	// by default the DefaultRequestInterceptor alone.
	Pipeline []string
	// RollInterval and ActivationDelay schedule the local keys as YARN's
	// AMRMProxyTokenSecretManager does: the RM's AMRMToken rolling
	// interval, and 1.5 × the AM liveness expiry.
	RollInterval, ActivationDelay time.Duration
}

// SettingsFromHadoop reads the settings, yarn-default.xml's values where
// the configuration has none.
func SettingsFromHadoop(c *hadoopconf.Configuration) (Settings, error) {
	var s Settings
	var err error
	if s.Enabled, err = c.GetBool(hadoopconf.KeyAMRMProxyEnabled, false); err != nil {
		return Settings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMRMProxyEnabled, err)
	}
	if s.Address, err = c.GetTrimmed(hadoopconf.KeyAMRMProxyAddress, DefaultAddress); err != nil {
		return Settings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMRMProxyAddress, err)
	}
	if s.Pipeline, err = c.GetStrings(hadoopconf.KeyAMRMProxyPipeline, []string{DefaultInterceptorName}); err != nil {
		return Settings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMRMProxyPipeline, err)
	}
	secs, err := c.GetInt64(hadoopconf.KeyAMRMTokenRollingInterval, 86400)
	if err != nil {
		return Settings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMRMTokenRollingInterval, err)
	}
	s.RollInterval = time.Duration(secs) * time.Second
	expiry, err := c.GetDuration(hadoopconf.KeyAMExpiryInterval, 600*time.Second, time.Millisecond)
	if err != nil {
		return Settings{}, fmt.Errorf("amrmproxy: %s: %w", hadoopconf.KeyAMExpiryInterval, err)
	}
	s.ActivationDelay = expiry * 3 / 2
	if s.RollInterval <= 2*s.ActivationDelay {
		return Settings{}, fmt.Errorf("amrmproxy: %s should be more than 3 X %s", hadoopconf.KeyAMRMTokenRollingInterval, hadoopconf.KeyAMExpiryInterval)
	}
	return s, nil
}
