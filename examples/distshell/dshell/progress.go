package dshell

import (
	"fmt"
	"strings"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// tracker counts the AM's containers as DistributedShell's
// ApplicationMaster does: allocated ones it takes, completed ones and the
// failed among them. Failed containers are not run again.
type tracker struct {
	total     int
	allocated int
	completed int
	failed    int
	// failures describe each failed container, in the order they failed.
	failures []string
	// taken are the containers the AM runs; counted those already counted
	// as completed (a start failure may be reported complete again later).
	taken, counted map[string]bool
}

func newTracker(total int) *tracker {
	return &tracker{total: total, taken: map[string]bool{}, counted: map[string]bool{}}
}

// take decides about an allocated container: true to run it, false if
// enough are running and it should be released.
func (t *tracker) take(id string) bool {
	if t.allocated >= t.total || t.taken[id] {
		return false
	}
	t.taken[id] = true
	t.allocated++
	return true
}

// outstanding is how many containers are still to be allocated: the
// absolute total the AM states in its ask.
func (t *tracker) outstanding() int { return t.total - t.allocated }

// startFailed counts a container its node refused to start as completed and
// failed.
func (t *tracker) startFailed(id string, err error) {
	if !t.taken[id] || t.counted[id] {
		return
	}
	t.counted[id] = true
	t.completed++
	t.failed++
	t.failures = append(t.failures, fmt.Sprintf("%s failed to start: %v", id, err))
}

// containerCompleted counts a completed container the AM ran: exit status 0
// is a success, anything else (killed, lost or a failing command) a failure.
func (t *tracker) containerCompleted(st *yarnpb.ContainerStatusProto) {
	id := containerIDString(st.GetContainerId())
	if !t.taken[id] || t.counted[id] {
		return // released, or counted already
	}
	t.counted[id] = true
	t.completed++
	if code := st.GetExitStatus(); code != 0 {
		t.failed++
		t.failures = append(t.failures, fmt.Sprintf("%s exit status %d", id, code))
	}
}

// done reports whether every container has completed.
func (t *tracker) done() bool { return t.completed >= t.total }

// succeeded reports whether every container completed with exit status 0.
func (t *tracker) succeeded() bool { return t.completed-t.failed >= t.total }

// progress is the share of containers completed, for allocate.
func (t *tracker) progress() float32 { return float32(t.completed) / float32(t.total) }

// diagnostics is the final message of a failed run: DistributedShell's
// counts, then each failed container.
func (t *tracker) diagnostics() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Diagnostics., total=%d, completed=%d, allocated=%d, failed=%d", t.total, t.completed, t.allocated, t.failed)
	for _, f := range t.failures {
		b.WriteString("; ")
		b.WriteString(f)
	}
	return b.String()
}

// containerIDString names a container id, falling back to the proto's text.
func containerIDString(p *yarnpb.ContainerIdProto) string {
	if id, err := yarnid.ContainerIDFromProto(p); err == nil {
		return id.String()
	}
	return fmt.Sprint(p)
}
