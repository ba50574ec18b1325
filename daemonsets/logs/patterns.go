package logs

import (
	"fmt"
	"regexp"

	"github.com/knitdev/knit/rks/launch"
)

// fileFilter picks the log files one aggregation uploads, as
// AggregatedLogFormat.LogValue's filterFiles does: a file is kept when
// the include pattern is found in its name (Java's Matcher.find, not a
// whole match) and the exclude pattern is not. An empty pattern filters
// nothing.
type fileFilter struct {
	include, exclude *regexp.Regexp
}

// keep reports whether the file named name is uploaded.
func (f fileFilter) keep(name string) bool {
	if f.include != nil && !f.include.MatchString(name) {
		return false
	}
	return f.exclude == nil || !f.exclude.MatchString(name)
}

// filters are an application's two filters: the one of its final
// aggregation and the one of rolling aggregation (rolled is nil when the
// application did not ask for rolling, a rolled-logs include pattern).
type filters struct {
	final  fileFilter
	rolled *fileFilter
}

// filtersOf compiles the application's patterns. A pattern Go's regexp
// syntax cannot read (Java's back references and lookarounds) is left out
// with an error beside the filters: the final aggregation then uploads
// more than the application asked, never less.
func filtersOf(c *launch.LogAggregationContext) (filters, error) {
	var fs filters
	if c == nil {
		return fs, nil
	}
	var errs []error
	compile := func(key, pattern string) *regexp.Regexp {
		if pattern == "" {
			return nil
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", key, pattern, err))
			return nil
		}
		return re
	}
	fs.final = fileFilter{include: compile("include pattern", c.IncludePattern), exclude: compile("exclude pattern", c.ExcludePattern)}
	// Rolling deletes what it uploads from the node, so a rolled include
	// pattern that cannot be read turns rolling off rather than upload
	// (and delete) every file of a running container.
	if inc := compile("rolled logs include pattern", c.RolledLogsIncludePattern); inc != nil {
		fs.rolled = &fileFilter{include: inc, exclude: compile("rolled logs exclude pattern", c.RolledLogsExcludePattern)}
	}
	if len(errs) > 0 {
		return fs, fmt.Errorf("logs: patterns left out: %v", errs)
	}
	return fs, nil
}
