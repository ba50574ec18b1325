package conf

import (
	"strings"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

// YARN's keys of the scheduler monitor and its
// ProportionalCapacityPreemptionPolicy.
const (
	KeySchedulerMonitorEnable   = "yarn.resourcemanager.scheduler.monitor.enable"
	KeySchedulerMonitorPolicies = "yarn.resourcemanager.scheduler.monitor.policies"
	keyPreemptionPrefix         = "yarn.resourcemanager.monitor.capacity.preemption."
	KeyPreemptionInterval       = keyPreemptionPrefix + "monitoring_interval"
	KeyPreemptionMaxWait        = keyPreemptionPrefix + "max_wait_before_kill"
	KeyPreemptionPerRound       = keyPreemptionPrefix + "total_preemption_per_round"
	KeyPreemptionMaxIgnored     = keyPreemptionPrefix + "max_ignored_over_capacity"
	KeyPreemptionNaturalFactor  = keyPreemptionPrefix + "natural_termination_factor"

	// proportionalPolicy is the policy class Knit carries out.
	proportionalPolicy = "ProportionalCapacityPreemptionPolicy"
)

// Preemption is how the RM takes containers back from queues over their
// share for queues below their guarantee.
type Preemption struct {
	// Enabled is yarn.resourcemanager.scheduler.monitor.enable (off by
	// default, as in YARN) with ProportionalCapacityPreemptionPolicy among
	// the monitor's policies (its default).
	Enabled bool
	// Interval is monitoring_interval (3 s); MaxWaitBeforeKill is
	// max_wait_before_kill (15 s), the AM's time to give containers back.
	Interval, MaxWaitBeforeKill time.Duration
	// PerRound, MaxIgnoredOverCapacity and NaturalTerminationFactor are
	// total_preemption_per_round (0.1), max_ignored_over_capacity (0.1) and
	// natural_termination_factor (0.2).
	PerRound, MaxIgnoredOverCapacity, NaturalTerminationFactor float64
}

// LoadPreemption reads the preemption settings of c, with YARN's defaults.
func LoadPreemption(c *hadoopconf.Configuration) (Preemption, error) {
	var p Preemption
	var err error
	if p.Enabled, err = c.GetBool(KeySchedulerMonitorEnable, false); err != nil {
		return p, err
	}
	policies, err := c.GetTrimmed(KeySchedulerMonitorPolicies, "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity."+proportionalPolicy)
	if err != nil {
		return p, err
	}
	p.Enabled = p.Enabled && strings.Contains(policies, proportionalPolicy)
	if p.Interval, err = c.GetDuration(KeyPreemptionInterval, 3*time.Second, time.Millisecond); err != nil {
		return p, err
	}
	if p.MaxWaitBeforeKill, err = c.GetDuration(KeyPreemptionMaxWait, 15*time.Second, time.Millisecond); err != nil {
		return p, err
	}
	for _, f := range []struct {
		dst *float64
		key string
		def float32
	}{
		{&p.PerRound, KeyPreemptionPerRound, 0.1},
		{&p.MaxIgnoredOverCapacity, KeyPreemptionMaxIgnored, 0.1},
		{&p.NaturalTerminationFactor, KeyPreemptionNaturalFactor, 0.2},
	} {
		v, err := c.GetFloat(f.key, f.def)
		if err != nil {
			return p, err
		}
		*f.dst = float64(v)
	}
	return p, nil
}
