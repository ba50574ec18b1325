package logs

import (
	"strings"
	"testing"
	"time"
)

// TestSettingsReadRetainSecondsAsHadoop: retain-seconds is a Java long as
// Configuration.getLong reads it (0x hex included); a value that is none
// names the key.
func TestSettingsReadRetainSecondsAsHadoop(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{{"", 3 * time.Hour}, {" 60 ", time.Minute}, {"0x10", 16 * time.Second}, {"-1", -time.Second}} {
		conf := func(k string) (string, bool) {
			return tc.value, tc.value != "" && k == "yarn.nodemanager.log.retain-seconds"
		}
		s, err := SettingsFromHadoop(conf)
		if err != nil || s.Retain != tc.want {
			t.Errorf("%q: Retain %v, %v; want %v", tc.value, s.Retain, err, tc.want)
		}
	}
	_, err := SettingsFromHadoop(func(k string) (string, bool) { return "3h", k == "yarn.nodemanager.log.retain-seconds" })
	if err == nil || !strings.Contains(err.Error(), "yarn.nodemanager.log.retain-seconds") {
		t.Errorf("3h: %v", err)
	}
}

// TestRollIntervalIsNeverUnderItsMinimumUnlessDebugging follows
// LogAggregationService.calculateRollingMonitorInterval.
func TestRollIntervalIsNeverUnderItsMinimumUnlessDebugging(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]string
		want time.Duration
	}{
		{"off by default", nil, 0},
		{"zero and negative are off", map[string]string{confRollInterval: "0"}, 0},
		{"over the minimum as set", map[string]string{confRollInterval: "7200"}, 2 * time.Hour},
		{"under the minimum raised to an hour", map[string]string{confRollInterval: "60"}, time.Hour},
		{"under a lowered minimum raised to it", map[string]string{confRollInterval: "60", confRollIntervalMin: "300"}, 5 * time.Minute},
		{"under the minimum kept when debugging", map[string]string{confRollInterval: "60", confDebugEnabled: "true"}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := SettingsFromHadoop(func(k string) (string, bool) { v, ok := tc.conf[k]; return v, ok })
			if err != nil || s.RollInterval != tc.want {
				t.Errorf("RollInterval %v, %v; want %v", s.RollInterval, err, tc.want)
			}
		})
	}
	if _, err := SettingsFromHadoop(func(k string) (string, bool) { return "1h", k == confRollInterval }); err == nil || !strings.Contains(err.Error(), confRollInterval) {
		t.Errorf("1h: %v", err)
	}
}
