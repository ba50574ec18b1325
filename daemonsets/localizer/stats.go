package localizer

import (
	"sync/atomic"
	"time"
)

// Stats are the localizer's figures since it started, for the node's
// /metrics.
type Stats struct {
	// Containers prepared, and those whose localization failed (the
	// container then fails as the NodeManager fails it).
	Prepared, Failed int64
	// Bytes and files fetched, and those the cache already held
	// (LOCALIZATION_COUNTERS, summed).
	BytesFetched, BytesCached, FilesFetched, FilesCached int64
	// Seconds spent preparing containers.
	Seconds float64
}

// stats are Stats as they are counted, safe for concurrent use.
type stats struct {
	prepared, failed                                     atomic.Int64
	bytesFetched, bytesCached, filesFetched, filesCached atomic.Int64
	nanos                                                atomic.Int64
}

// count records one container's preparation.
func (s *stats) count(c counters, took time.Duration, failed bool) {
	if failed {
		s.failed.Add(1)
	} else {
		s.prepared.Add(1)
	}
	s.bytesFetched.Add(c.bytesMissed)
	s.bytesCached.Add(c.bytesHit)
	s.filesFetched.Add(c.filesMissed)
	s.filesCached.Add(c.filesHit)
	s.nanos.Add(int64(took))
}

// Stats returns the localizer's figures now.
func (l *Localizer) Stats() Stats {
	s := &l.stats
	return Stats{
		Prepared: s.prepared.Load(), Failed: s.failed.Load(),
		BytesFetched: s.bytesFetched.Load(), BytesCached: s.bytesCached.Load(),
		FilesFetched: s.filesFetched.Load(), FilesCached: s.filesCached.Load(),
		Seconds: time.Duration(s.nanos.Load()).Seconds(),
	}
}
