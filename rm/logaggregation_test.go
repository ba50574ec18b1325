package rm

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// aggregationNodes is fixedNodes with the statuses knit-node publishes.
type aggregationNodes struct {
	fixedNodes
	mu       sync.Mutex
	statuses map[string]map[string]string // node name → app → status
}

func (n *aggregationNodes) NodeName(host string) (string, bool) {
	for _, i := range n.fixedNodes {
		if i.Host == host {
			return i.Name, true
		}
	}
	return "", false
}

func (n *aggregationNodes) LogAggregation(node string) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]string{}
	for k, v := range n.statuses[node] {
		out[k] = v
	}
	return out
}

func (n *aggregationNodes) set(node, app, status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.statuses[node] == nil {
		n.statuses[node] = map[string]string{}
	}
	n.statuses[node][app] = status
}

func TestLogAggregationStatusComesFromTheNodes(t *testing.T) {
	nodes := &aggregationNodes{
		fixedNodes: fixedNodes{{Name: "n1", Host: "node1", NMPort: 8041}, {Name: "n2", Host: "node2", NMPort: 8041}},
		statuses:   map[string]map[string]string{},
	}
	e := newEnv(t, envOptions{nodes: nodes})
	e.rm.cfg.Settings.LogAggregationEnable = true
	c := e.client("alice")
	id := e.mustSubmit(c, subOpts{})
	app := appIDOf(t, id).String()
	status := func() yarnpb.LogAggregationStatusProto {
		en := e.rm.lookup(appIDOf(t, id))
		en.mu.Lock()
		defer en.mu.Unlock()
		return e.rm.logAggregationStatus(context.Background(), en)
	}
	if got := status(); got != yarnpb.LogAggregationStatusProto_LOG_NOT_START {
		t.Errorf("running: %v", got)
	}
	req := &yarnpb.KillApplicationRequestProto{ApplicationId: id, Diagnostics: proto.String("done")}
	mustCall(t, c, "forceKillApplication", req, &yarnpb.KillApplicationResponseProto{})
	mustCall(t, c, "forceKillApplication", req, &yarnpb.KillApplicationResponseProto{})

	// The application ran no container here: the nodes that report it
	// are its nodes.
	nodes.set("n1", app, "RUNNING")
	nodes.set("n2", app, "SUCCEEDED")
	if got := status(); got != yarnpb.LogAggregationStatusProto_LOG_RUNNING {
		t.Errorf("one node aggregating: %v", got)
	}
	nodes.set("n1", app, "SUCCEEDED")
	if got := status(); got != yarnpb.LogAggregationStatusProto_LOG_SUCCEEDED {
		t.Errorf("both stored: %v", got)
	}
	nodes.set("n2", app, "FAILED")
	if got := status(); got != yarnpb.LogAggregationStatusProto_LOG_FAILED {
		t.Errorf("one failed: %v", got)
	}
	nodes.set("n2", app, "RUNNING")
	e.clock.Add(11 * time.Minute)
	if got := status(); got != yarnpb.LogAggregationStatusProto_LOG_TIME_OUT {
		t.Errorf("after the timeout: %v", got)
	}
}
