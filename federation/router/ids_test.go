package router

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/knitdev/knit/federation/membership"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// idsEpoch is the test clock's start; its milliseconds are the first
// timestamp a Router tries to claim.
var idsEpoch = time.UnixMilli(1_795_000_000_000)

func claimant(t *testing.T, s store.StateStore, id string) *membership.Timestamps {
	t.Helper()
	ts, err := membership.NewTimestamps(s, id)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestTheRouterNamesApplicationsItselfWhileItKnowsTheSubClustersCapability(t *testing.T) {
	ctx := t.Context()
	s := store.NewMemory(nil)
	rm := startRM(t, "sc1", 1)
	join(t, s, rm)
	clock := testingclock.NewFakeClock(idsEpoch)
	_, c := serveRouter(t, s, routerOptions{ids: claimant(t, s, "router-a"), capabilityTTL: time.Minute, now: clock.Now})

	newApp := func() *yarnpb.GetNewApplicationResponseProto {
		t.Helper()
		resp, err := c.GetNewApplication(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := yarnpb.NewResource(8192, 4); !proto.Equal(resp.GetMaximumCapability(), want) {
			t.Errorf("maximum capability %v, want the sub-cluster's %v", resp.GetMaximumCapability(), want)
		}
		return resp
	}
	// The Router claims its timestamp when it first names an application,
	// a second in.
	own := idsEpoch.Add(time.Second).UnixMilli()
	steps := []struct {
		name    string
		advance time.Duration
		want    yarnid.ApplicationID
	}{
		{"the first asks the sub-cluster, learning its capability", 0, yarnid.ApplicationID{ClusterTimestamp: 1, ID: 1}},
		{"the next is the Router's, under the timestamp it claimed", time.Second, yarnid.ApplicationID{ClusterTimestamp: own, ID: 1}},
		{"and the one after follows it", time.Second, yarnid.ApplicationID{ClusterTimestamp: own, ID: 2}},
		{"a capability past its TTL is asked again", time.Minute, yarnid.ApplicationID{ClusterTimestamp: 1, ID: 2}},
		{"then the Router names them again, its timestamp kept", time.Second, yarnid.ApplicationID{ClusterTimestamp: own, ID: 3}},
	}
	for _, step := range steps {
		clock.Step(step.advance)
		got, err := yarnid.ApplicationIDFromProto(newApp().GetApplicationId())
		if err != nil {
			t.Fatal(err)
		}
		if got != step.want {
			t.Errorf("%s: id %s, want %s", step.name, got, step.want)
		}
	}

	// The RM takes an id it never gave, and the Router routes its calls.
	id := yarnid.ApplicationID{ClusterTimestamp: own, ID: 3}
	if err := c.SubmitApplication(ctx, submission(id.Proto(), "default")); err != nil {
		t.Fatal(err)
	}
	report, err := c.GetApplicationReport(ctx, id.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := yarnid.ApplicationIDFromProto(report.GetApplicationId()); got != id {
		t.Errorf("report of %s, want %s", got, id)
	}
}

func TestRoutersAndRMsOfOneStoreNeverShareATimestamp(t *testing.T) {
	ctx := t.Context()
	s := store.NewMemory(nil)
	now := idsEpoch.UnixMilli()
	// An RM of the federation claimed the Routers' first millisecond.
	if _, err := claimant(t, s, "sc1").Pick(ctx, now); err != nil {
		t.Fatal(err)
	}
	clock := testingclock.NewFakeClock(idsEpoch)
	a := &applicationIDs{picker: claimant(t, s, "router-a"), now: clock.Now}
	b := &applicationIDs{picker: claimant(t, s, "router-b"), now: clock.Now}
	seen := map[yarnid.ApplicationID]string{}
	for range 3 {
		for name, ids := range map[string]*applicationIDs{"a": a, "b": b} {
			id, err := ids.next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if id.ClusterTimestamp == now {
				t.Errorf("Router %s named %s under the RM's timestamp", name, id)
			}
			if other, ok := seen[id]; ok {
				t.Errorf("Routers %s and %s both named %s", other, name, id)
			}
			seen[id] = name
		}
	}
}

func TestARouterWhoseSequenceRunsOutClaimsANewTimestamp(t *testing.T) {
	ctx := t.Context()
	s := store.NewMemory(nil)
	clock := testingclock.NewFakeClock(idsEpoch)
	ids := &applicationIDs{picker: claimant(t, s, "router-a"), now: clock.Now}
	first, err := ids.next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids.seq = math.MaxInt32
	next, err := ids.next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The clock stood still: the next millisecond is claimed.
	if want := (yarnid.ApplicationID{ClusterTimestamp: first.ClusterTimestamp + 1, ID: 1}); next != want {
		t.Errorf("after the last sequence number: %s, want %s", next, want)
	}
}

// failingPicker picks as a store that takes no claim would.
type failingPicker struct{}

func (failingPicker) Pick(context.Context, int64) (int64, error) {
	return 0, errors.New("store unreachable")
}

func TestWhenTheRouterCannotClaimATimestampTheSubClusterNamesTheApplication(t *testing.T) {
	s := store.NewMemory(nil)
	rm := startRM(t, "sc1", 1)
	join(t, s, rm)
	_, c := serveRouter(t, s, routerOptions{ids: failingPicker{}})
	for want := range int32(3) {
		resp, err := c.GetNewApplication(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := yarnid.ApplicationIDFromProto(resp.GetApplicationId())
		if want := (yarnid.ApplicationID{ClusterTimestamp: 1, ID: want + 1}); got != want {
			t.Errorf("id %s, want the sub-cluster's %s", got, want)
		}
	}
}
