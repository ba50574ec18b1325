package logs

import (
	"sync/atomic"
	"time"
)

// AggregationStats are the aggregator's figures since it started, for the
// node's /metrics.
type AggregationStats struct {
	// Applications aggregated, and those given up as FAILED.
	Aggregated, Failed int64
	// Uploads written to the remote app log dir (final and rolled), the
	// bytes they held, and the attempts that failed (each retried).
	Uploads, Bytes, UploadFailures int64
	// Seconds spent writing uploads.
	Seconds float64
	// Queued are the applications waiting for aggregation now.
	Queued int
}

type aggStats struct {
	aggregated, failed, uploads, bytes, uploadFailures, nanos atomic.Int64
}

// Stats returns the aggregator's figures now.
func (a *Aggregator) Stats() AggregationStats {
	s := &a.stats
	return AggregationStats{
		Aggregated: s.aggregated.Load(), Failed: s.failed.Load(),
		Uploads: s.uploads.Load(), Bytes: s.bytes.Load(), UploadFailures: s.uploadFailures.Load(),
		Seconds: time.Duration(s.nanos.Load()).Seconds(), Queued: a.queue.Len(),
	}
}
