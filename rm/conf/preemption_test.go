package conf

import (
	"testing"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

func TestPreemptionIsOffByDefaultAndReadAsYARNReadsIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]string
		want Preemption
	}{
		{"YARN's defaults", nil, Preemption{Interval: 3 * time.Second, MaxWaitBeforeKill: 15 * time.Second, PerRound: f32(0.1), MaxIgnoredOverCapacity: f32(0.1), NaturalTerminationFactor: f32(0.2)}},
		{"on with the monitor", map[string]string{KeySchedulerMonitorEnable: "true", KeyPreemptionMaxWait: "2000", KeyPreemptionInterval: "500"},
			Preemption{Enabled: true, Interval: 500 * time.Millisecond, MaxWaitBeforeKill: 2 * time.Second, PerRound: f32(0.1), MaxIgnoredOverCapacity: f32(0.1), NaturalTerminationFactor: f32(0.2)}},
		{"off when the monitor runs another policy", map[string]string{KeySchedulerMonitorEnable: "true", KeySchedulerMonitorPolicies: "org.example.OtherPolicy"},
			Preemption{Interval: 3 * time.Second, MaxWaitBeforeKill: 15 * time.Second, PerRound: f32(0.1), MaxIgnoredOverCapacity: f32(0.1), NaturalTerminationFactor: f32(0.2)}},
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

// f32 is v as Hadoop's getFloat reads it: a Java float.
func f32(v float32) float64 { return float64(v) }
