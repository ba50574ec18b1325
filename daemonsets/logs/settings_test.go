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
