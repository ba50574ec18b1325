package conf

import (
	"fmt"
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
	KeyPreemptionObserveOnly    = keyPreemptionPrefix + "observe_only"

	// The IntraQueueCandidatesSelector's keys.
	keyIntraQueuePrefix            = keyPreemptionPrefix + "intra-queue-preemption."
	KeyIntraQueuePreemption        = keyIntraQueuePrefix + "enabled"
	KeyIntraQueueMinimumThreshold  = keyIntraQueuePrefix + "minimum-threshold"
	KeyIntraQueueMaxAllowableLimit = keyIntraQueuePrefix + "max-allowable-limit"
	KeyIntraQueueOrderPolicy       = keyIntraQueuePrefix + "preemption-order-policy"

	// IntraQueueUserLimitFirst and IntraQueuePriorityFirst are the
	// preemption-order-policy values.
	IntraQueueUserLimitFirst = "userlimit_first"
	IntraQueuePriorityFirst  = "priority_first"

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
	// ObserveOnly is observe_only (false): rounds choose containers but
	// take none back.
	ObserveOnly bool
	// Interval is monitoring_interval (3 s); MaxWaitBeforeKill is
	// max_wait_before_kill (15 s), the AM's time to give containers back.
	Interval, MaxWaitBeforeKill time.Duration
	// PerRound, MaxIgnoredOverCapacity and NaturalTerminationFactor are
	// total_preemption_per_round (0.1), max_ignored_over_capacity (0.1) and
	// natural_termination_factor (0.2).
	PerRound, MaxIgnoredOverCapacity, NaturalTerminationFactor float64
	// IntraQueue is intra-queue-preemption.enabled (false): containers are
	// also taken back within a leaf, for its applications of higher
	// priority and its users below their limit.
	IntraQueue bool
	// IntraQueueMinimumThreshold and IntraQueueMaxAllowableLimit are
	// intra-queue-preemption.minimum-threshold (0.5) and
	// max-allowable-limit (0.2).
	IntraQueueMinimumThreshold, IntraQueueMaxAllowableLimit float64
	// IntraQueueOrderPolicy is intra-queue-preemption.preemption-order-policy,
	// IntraQueueUserLimitFirst (the default) or IntraQueuePriorityFirst, in
	// lower case whatever case it was given in.
	IntraQueueOrderPolicy string
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
		{&p.IntraQueueMinimumThreshold, KeyIntraQueueMinimumThreshold, 0.5},
		{&p.IntraQueueMaxAllowableLimit, KeyIntraQueueMaxAllowableLimit, 0.2},
	} {
		v, err := c.GetFloat(f.key, f.def)
		if err != nil {
			return p, err
		}
		*f.dst = float64(v)
	}
	if p.IntraQueue, err = c.GetBool(KeyIntraQueuePreemption, false); err != nil {
		return p, err
	}
	if p.ObserveOnly, err = c.GetBool(KeyPreemptionObserveOnly, false); err != nil {
		return p, err
	}
	// ProportionalCapacityPreemptionPolicy reads the order as the name of an
	// enum constant in upper case, and fails on any other.
	order, err := c.GetTrimmed(KeyIntraQueueOrderPolicy, IntraQueueUserLimitFirst)
	if err != nil {
		return p, err
	}
	switch p.IntraQueueOrderPolicy = strings.ToLower(order); p.IntraQueueOrderPolicy {
	case IntraQueueUserLimitFirst, IntraQueuePriorityFirst:
	default:
		return p, fmt.Errorf("%s: %w: %q is neither %s nor %s", KeyIntraQueueOrderPolicy, hadoopconf.ErrInvalidValue, order, IntraQueueUserLimitFirst, IntraQueuePriorityFirst)
	}
	return p, nil
}
