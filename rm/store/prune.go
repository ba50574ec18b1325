package store

import (
	"cmp"
	"slices"
)

// Completed application states, as YARN names them.
const (
	StateFinished = "FINISHED"
	StateFailed   = "FAILED"
	StateKilled   = "KILLED"
)

// IsCompleted reports whether state is one an application never leaves.
func IsCompleted(state string) bool {
	return state == StateFinished || state == StateFailed || state == StateKilled
}

// OldestCompleted returns the ids of the completed records to delete so that
// at most keep completed ones are kept
// (yarn.resourcemanager.max-completed-applications), oldest finish time
// first; ties go by id, so the answer does not depend on the order of
// records. A completed record without a finish time counts as the oldest.
// Records still running are never chosen. A negative keep counts as 0.
func OldestCompleted(records []Record, keep int) []string {
	var done []Record
	for _, r := range records {
		if IsCompleted(r.State) {
			done = append(done, r)
		}
	}
	keep = max(keep, 0)
	if len(done) <= keep {
		return nil
	}
	slices.SortFunc(done, func(a, b Record) int {
		if c := a.FinishTime.Compare(b.FinishTime); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	ids := make([]string, 0, len(done)-keep)
	for _, r := range done[:len(done)-keep] {
		ids = append(ids, r.ID)
	}
	return ids
}
