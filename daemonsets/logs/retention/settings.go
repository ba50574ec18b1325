package retention

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/knitdev/knit/daemonsets/logs"
	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/hadoopconf"
)

// Configuration keys and defaults (YarnConfiguration).
const (
	ConfRetainSeconds        = "yarn.log-aggregation.retain-seconds"
	ConfCheckIntervalSeconds = "yarn.log-aggregation.retain-check-interval-seconds"
	// DefaultRetainSeconds keeps aggregated logs forever.
	DefaultRetainSeconds = -1
	// DefaultCheckIntervalSeconds means a tenth of the retain time.
	DefaultCheckIntervalSeconds = -1
)

// Settings say whether, how long and where aggregated logs are kept.
type Settings struct {
	// Enabled is true when yarn.log-aggregation-enable is set and
	// yarn.log-aggregation.retain-seconds is not negative.
	Enabled bool
	// Retain is yarn.log-aggregation.retain-seconds.
	Retain time.Duration
	// Interval is yarn.log-aggregation.retain-check-interval-seconds, or a
	// tenth of Retain when that is not positive.
	Interval time.Duration
	// Roots are the remote root log dirs of the formats
	// yarn.log-aggregation.file-formats lists, each once: formats that
	// share a root share its bucket-* folders, which every walk of that
	// root covers.
	Roots []string
}

// SettingsFromHadoop reads the retention keys, as
// AggregatedLogDeletionService.scheduleLogDeletionTasks does. A zero
// retain time with no check interval is refused: YARN's timer refuses
// the zero period it gives.
func SettingsFromHadoop(c *hadoopconf.Configuration) (Settings, error) {
	var s Settings
	aggregate, err := c.GetBool(aggregated.ConfEnable, false)
	if err != nil {
		return s, err
	}
	secs, err := c.GetInt64(ConfRetainSeconds, DefaultRetainSeconds)
	if err != nil {
		return s, fmt.Errorf("%s: %w", ConfRetainSeconds, err)
	}
	if !aggregate || secs < 0 {
		return s, nil
	}
	every, err := c.GetInt64(ConfCheckIntervalSeconds, DefaultCheckIntervalSeconds)
	if err != nil {
		return s, fmt.Errorf("%s: %w", ConfCheckIntervalSeconds, err)
	}
	s.Retain = seconds(secs)
	s.Interval = seconds(every)
	if every <= 0 {
		s.Interval = s.Retain / 10
	}
	if s.Interval <= 0 {
		return s, fmt.Errorf("%s is 0 and %s is not set: aggregated logs would be checked without pause", ConfRetainSeconds, ConfCheckIntervalSeconds)
	}
	conf := lookup(c)
	for _, f := range aggregated.ReadFormats(conf) {
		if root := aggregated.LayoutFor(f, conf).Root; !slices.Contains(s.Roots, root) {
			s.Roots = append(s.Roots, root)
		}
	}
	s.Enabled = true
	return s, nil
}

// seconds is n seconds as a Duration, the longest Duration past it: a
// retain time of centuries keeps logs as long as one of 292 years does.
func seconds(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// Stores returns the store of each of s.Roots, as knit-node writes them
// (logs.StoreFor).
func Stores(s Settings, c *hadoopconf.Configuration) (map[string]Store, error) {
	out := make(map[string]Store, len(s.Roots))
	for _, root := range s.Roots {
		st, err := logs.StoreFor(root, lookup(c))
		if err != nil {
			return nil, err
		}
		rs, ok := st.(Store)
		if !ok {
			return nil, fmt.Errorf("remote app log dir %s: its store cannot delete", root)
		}
		out[root] = rs
	}
	return out, nil
}

func lookup(c *hadoopconf.Configuration) aggregated.Conf {
	return func(key string) (string, bool) {
		v, ok, err := c.Lookup(key)
		return v, ok && err == nil
	}
}
