package rm

import (
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// ApplicationTerminated reports whether the application has ended as a
// client's report shows it (FINISHED, FAILED or KILLED; FINISHING shows
// FINISHED), or is unknown: what AggregatedLogDeletionService asks before it
// deletes an application's logs, where ApplicationNotFoundException counts
// as ended.
func (rm *ResourceManager) ApplicationTerminated(id yarnid.ApplicationID) bool {
	e := rm.lookup(id)
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.app.ClientState() {
	case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
		return true
	}
	return false
}
