package tokens

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// The NodeManager reads an application's LogAggregationContext from its
// containers' tokens, so every token RGS has signed carries it.
func TestSignedContainerTokensCarryTheLogAggregationContext(t *testing.T) {
	m := newManager(t, testConfig(newClock(time.Unix(1_700_000_000, 0)), &memStore{}))
	spec := testContainerSpec()
	ctr := &yarnpb.ContainerProto{Id: spec.ContainerID, NodeId: spec.NodeID, Resource: spec.Resource}
	for _, tc := range []struct {
		name string
		logs *yarnpb.LogAggregationContextProto
	}{
		{"without a context", nil},
		{"with patterns", &yarnpb.LogAggregationContextProto{IncludePattern: proto.String("std.*"), RolledLogsIncludePattern: proto.String("syslog")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := m.ContainerTokens().Sign(ctr, "alice", "", false, tc.logs)
			if err != nil {
				t.Fatal(err)
			}
			id, err := m.ContainerTokens().Verify(token.FromProto(tp))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(id.GetLogAggregationContext(), tc.logs) {
				t.Errorf("token carries %v, want %v", id.GetLogAggregationContext(), tc.logs)
			}
		})
	}
}
