package rgs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

func TestPodsAreCreatedInSlowStartBatchesThatStopAtTheFirstError(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p",
		errors.New("exceeded quota: yarn, requested: pods=1, used: pods=3, limited: pods=3"))
	tests := []struct {
		name string
		ask  int32
		// succeed is how many creates the API server takes before it
		// refuses every other.
		succeed     int
		wantCreates int
		wantPending int
	}{
		{"ten pods in batches of 1, 2, 4 and the 3 left", 10, 10, 10, 10},
		{"a namespace out of quota costs one create", 10, 0, 1, 0},
		{"a refusal in the third batch ends the sync after it", 10, 3, 7, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newVolcanoRig(t)
			var mu sync.Mutex
			creates := 0
			r.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				creates++
				if fm := a.(k8stesting.CreateActionImpl).CreateOptions.FieldManager; fm != fieldManager {
					t.Errorf("create by %q, want %q", fm, fieldManager)
				}
				if creates > tt.succeed {
					return true, nil, quota
				}
				return false, nil, nil
			})
			spec := scheduling.AttemptSpec{Attempt: yarnid.AttemptID{App: app7, ID: 1}, Role: launch.RoleTask, Queue: "root.plain", User: "alice"}
			r.c.Ask(spec, []*yarnpb.ResourceRequestProto{req(1, "*", tt.ask, true)})
			err := r.c.syncBook(context.Background(), bookKey{spec.Attempt, spec.Role})
			if failed := tt.succeed < int(tt.ask); (err != nil) != failed || err != nil && terminal(err) {
				t.Errorf("sync: %v; want an error for the queue to retry: %v", err, failed)
			}
			if creates != tt.wantCreates {
				t.Errorf("%d creates, want %d", creates, tt.wantCreates)
			}
			if got := len(r.c.books[bookKey{spec.Attempt, spec.Role}].pending); got != tt.wantPending || len(r.pods(t)) != tt.wantPending {
				t.Errorf("%d pending in the book, %d pods; want %d", got, len(r.pods(t)), tt.wantPending)
			}
		})
	}
}

func TestPendingCountsEachQueueUserAndPartitionsWaitingPods(t *testing.T) {
	r := newVolcanoRig(t)
	spec := scheduling.AttemptSpec{Attempt: yarnid.AttemptID{App: app7, ID: 1}, Role: launch.RoleTask, Queue: "root.plain", User: "alice"}
	gpu := req(2, "*", 1, true)
	gpu.NodeLabelExpression = proto.String("gpu")
	gpu.Capability = &yarnpb.ResourceProto{Memory: proto.Int64(4096), VirtualCores: proto.Int32(2)}
	r.c.Ask(spec, []*yarnpb.ResourceRequestProto{req(1, "*", 2, true), gpu})
	if err := r.c.syncBook(t.Context(), bookKey{spec.Attempt, spec.Role}); err != nil {
		t.Fatal(err)
	}
	// The cache sees the pods created, with the partition their ask named.
	for _, p := range r.pods(t) {
		if err := r.factory.Core().V1().Pods().Informer().GetIndexer().Add(&p); err != nil {
			t.Fatal(err)
		}
	}
	got := r.c.Pending()
	slices.SortFunc(got, func(a, b Pending) int { return strings.Compare(a.Partition, b.Partition) })
	want := []Pending{
		{Queue: "root.plain", User: "alice", Pods: 2, MemoryMB: 2048, VCores: 2},
		{Queue: "root.plain", User: "alice", Partition: "gpu", Pods: 1, MemoryMB: 4096, VCores: 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Pending() = %+v, want %+v", got, want)
	}
}
