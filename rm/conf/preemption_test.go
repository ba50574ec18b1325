package conf

import (
	"errors"
	"testing"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

func TestPreemptionIsOffByDefaultAndReadAsYARNReadsIt(t *testing.T) {
	// defaults are YARN's, overridden by set.
	defaults := func(set func(*Preemption)) Preemption {
		p := Preemption{Interval: 3 * time.Second, MaxWaitBeforeKill: 15 * time.Second, PerRound: f32(0.1), MaxIgnoredOverCapacity: f32(0.1), NaturalTerminationFactor: f32(0.2),
			IntraQueueMinimumThreshold: f32(0.5), IntraQueueMaxAllowableLimit: f32(0.2), IntraQueueOrderPolicy: IntraQueueUserLimitFirst}
		if set != nil {
			set(&p)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want Preemption
	}{
		{"YARN's defaults: off, intra-queue preemption too", nil, defaults(nil)},
		{"on with the monitor", map[string]string{KeySchedulerMonitorEnable: "true", KeyPreemptionMaxWait: "2000", KeyPreemptionInterval: "500"},
			defaults(func(p *Preemption) {
				p.Enabled, p.Interval, p.MaxWaitBeforeKill = true, 500*time.Millisecond, 2*time.Second
			})},
		{"observe only", map[string]string{KeySchedulerMonitorEnable: "true", KeyPreemptionObserveOnly: "true"},
			defaults(func(p *Preemption) { p.Enabled, p.ObserveOnly = true, true })},
		{"off when the monitor runs another policy", map[string]string{KeySchedulerMonitorEnable: "true", KeySchedulerMonitorPolicies: "org.example.OtherPolicy"},
			defaults(nil)},
		{"intra-queue preemption with its limits and the order in any case", map[string]string{KeySchedulerMonitorEnable: "true",
			KeyIntraQueuePreemption: "true", KeyIntraQueueMinimumThreshold: "0.25", KeyIntraQueueMaxAllowableLimit: "0.5", KeyIntraQueueOrderPolicy: "PRIORITY_FIRST"},
			defaults(func(p *Preemption) {
				p.Enabled, p.IntraQueue, p.IntraQueueMinimumThreshold, p.IntraQueueMaxAllowableLimit = true, true, f32(0.25), f32(0.5)
				p.IntraQueueOrderPolicy = IntraQueuePriorityFirst
			})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{LookupEnv: func(string) (string, bool) { return "", false }})
			for k, v := range tc.set {
				c.Set(k, v)
			}
			got, err := LoadPreemption(c)
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// YARN's policy fails to start on an order that names no
// IntraQueuePreemptionOrderPolicy.
func TestAnIntraQueueOrderYARNDoesNotKnowIsAnError(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	c.Set(KeyIntraQueueOrderPolicy, "fairness_first")
	if _, err := LoadPreemption(c); !errors.Is(err, hadoopconf.ErrInvalidValue) {
		t.Errorf("err %v, want %v", err, hadoopconf.ErrInvalidValue)
	}
}

// f32 is v as Hadoop's getFloat reads it: a Java float.
func f32(v float32) float64 { return float64(v) }
