package rm

import (
	"context"
	"testing"

	"github.com/knitdev/knit/protocols/yarnid"
)

func TestLiveAttemptsAnswerForTheAttemptsAddedAndNotRemoved(t *testing.T) {
	l := NewLiveAttempts()
	a := yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}, ID: 1}
	if l.Valid(context.Background(), a.Proto()) {
		t.Fatal("an attempt never added is live")
	}
	l.add(a)
	if !l.Valid(context.Background(), a.Proto()) {
		t.Fatal("an added attempt is not live")
	}
	l.remove(a)
	if l.Valid(context.Background(), a.Proto()) {
		t.Fatal("a removed attempt is live")
	}
	if l.Valid(context.Background(), nil) {
		t.Fatal("no attempt is live")
	}
}

func TestContainerReportsComeInOrderAndWaitOnlyUntilTheirContextEnds(t *testing.T) {
	c := NewContainerReports()
	id := yarnid.ContainerID{Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: 1}, ID: 1}, Sequence: 2}
	c.ContainerStarted(context.Background(), id)
	c.ContainerUpdated(context.Background(), id, 3)
	if r := <-c.reports(); r.id != id || r.updated {
		t.Fatalf("first report %+v, want the start", r)
	}
	if r := <-c.reports(); r.id != id || !r.updated || r.version != 3 {
		t.Fatalf("second report %+v, want the update to version 3", r)
	}
	for range cap(c.ch) {
		c.ContainerStarted(context.Background(), id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.ContainerStarted(ctx, id) // the queue is full: returns as its context ended
	var none *ContainerReports
	if none.reports() != nil {
		t.Fatal("no queue has reports")
	}
}
