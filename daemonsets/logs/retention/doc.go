// Package retention deletes aggregated logs past
// yarn.log-aggregation.retain-seconds, as Hadoop 3.4.1's
// AggregatedLogDeletionService does; knit-rm runs it, since only the RM
// knows which applications are still running.
//
// Every yarn.log-aggregation.retain-check-interval-seconds (by default a
// tenth of the retain time) a Service walks each remote root log dir of
// the formats yarn.log-aggregation.file-formats lists, down the 3.4.1
// bucket layout <root>/<user>/bucket-<suffix>/<bucket>/<application>/<node
// file>. An application folder older than the cutoff goes whole once its
// application has ended (a final state, or unknown to the RM) and none of
// its node files is newer; while it runs, only its node files older than
// the cutoff go. Like YARN 3.4.1, it leaves alone the older layout
// <root>/<user>/<suffix>/<application> (only folders named bucket-* are
// walked), and the bucket folders an application folder leaves empty.
//
// A failure is logged and the walk goes on to the next folder; the next
// round tries again.
package retention
