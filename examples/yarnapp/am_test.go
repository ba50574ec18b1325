package yarnapp

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestAsksAreSentWhenTheirTotalChangedOrAContainerWasAllocatedSince(t *testing.T) {
	container := &yarnpb.ContainerProto{Priority: &yarnpb.PriorityProto{Priority: proto.Int32(20)}}
	type step struct {
		allocated int // containers allocated at priority 20 before the heartbeat
		want      int // the tasks waiting at the heartbeat
		sent      int // the total sent, -1 for nothing
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing wanted is never asked", []step{{want: 0, sent: -1}}},
		{"a total is sent once", []step{{want: 4, sent: 4}, {want: 4, sent: -1}}},
		{"a satisfied ask is cancelled with 0", []step{{want: 4, sent: 4}, {allocated: 4, want: 0, sent: 0}, {want: 0, sent: -1}}},
		{"tasks that failed between two heartbeats are asked for again", []step{{want: 4, sent: 4}, {allocated: 4, want: 4, sent: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Asks
			for i, s := range tt.steps {
				for range s.allocated {
					a.Allocated(container)
				}
				ask := a.Want(20, s.want, nil)
				switch {
				case s.sent < 0 && ask != nil:
					t.Errorf("heartbeat %d sent %d, want nothing", i, ask.GetNumContainers())
				case s.sent >= 0 && (ask == nil || ask.GetNumContainers() != int32(s.sent)):
					t.Errorf("heartbeat %d sent %v, want %d", i, ask, s.sent)
				}
			}
		})
	}
}
