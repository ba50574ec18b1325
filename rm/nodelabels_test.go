package rm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/queues"
)

func TestAnAskIsPlacedByItsLabelTheApplicationsOrTheQueuesDefaultAndOnlyInPartitionsTheQueueMayUse(t *testing.T) {
	gpu := &queues.Queue{Name: "b", Path: "root.b", AccessibleNodeLabels: []string{"gpu"}, DefaultNodeLabelExpression: "gpu"}
	plain := &queues.Queue{Name: "c", Path: "root.c", AccessibleNodeLabels: []string{"gpu", "ssd"}}
	every := &queues.Queue{Name: "default", Path: "root.default", AccessibleNodeLabels: []string{"*"}}
	none := &queues.Queue{Name: "d", Path: "root.d"}
	tests := []struct {
		name     string
		host     string
		label    *string // the ask's own
		appLabel string
		q        *queues.Queue
		want     string // the expression placed by, or the refusal
		refused  bool
	}{
		{name: "its own label", host: "*", label: proto.String("ssd"), appLabel: "gpu", q: plain, want: "ssd"},
		{name: "the application's, for an ask of any host", host: "*", appLabel: "ssd", q: plain, want: "ssd"},
		{name: "the queue's default without either", host: "*", q: gpu, want: "gpu"},
		{name: "an empty label of its own is the default partition", host: "*", label: proto.String(""), q: gpu, want: ""},
		{name: "an ask of one host takes no other label", host: "node-1", appLabel: "gpu", q: gpu, want: ""},
		{name: "any label in a queue that may use every partition", host: "*", label: proto.String("fpga"), q: every, want: "fpga"},
		{name: "the default partition in a queue with no labels", host: "*", q: none, want: ""},
		{name: "a label the queue may not use", host: "*", label: proto.String("ssd"), q: gpu, refused: true,
			want: "Invalid resource request, queue=b doesn't have permission to access all labels in resource request. labelExpression of resource request=ssd. Queue labels=gpu"},
		{name: "the application's label the queue may not use", host: "*", appLabel: "fpga", q: plain, refused: true,
			want: "Invalid resource request, queue=c doesn't have permission to access all labels in resource request. labelExpression of resource request=fpga. Queue labels=gpu,ssd"},
		{name: "a label in a queue with none", host: "*", label: proto.String("gpu"), q: none, refused: true,
			want: "Invalid resource request, queue=d doesn't have permission to access all labels in resource request. labelExpression of resource request=gpu. Queue labels="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &yarnpb.ResourceRequestProto{ResourceName: proto.String(tt.host), NodeLabelExpression: tt.label}
			err := labelAsk(r, tt.appLabel, tt.q)
			if tt.refused {
				wantRemote(t, err, yarnerr.InvalidLabelResourceRequest, tt.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.GetNodeLabelExpression(); got != tt.want {
				t.Errorf("placed by %q, want %q", got, tt.want)
			}
		})
	}
}

func TestASubmissionWhoseAMMayNotUseItsLabelIsRefused(t *testing.T) {
	e := newEnv(t, envOptions{queues: baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.accessible-node-labels":                      "gpu",
		"yarn.scheduler.capacity.root.accessible-node-labels.gpu.capacity":         "100",
		"yarn.scheduler.capacity.root.b.accessible-node-labels":                    "gpu",
		"yarn.scheduler.capacity.root.b.accessible-node-labels.gpu.capacity":       "100",
		"yarn.scheduler.capacity.root.default.accessible-node-labels":              " ",
		"yarn.scheduler.capacity.root.default.default-node-label-expression":       "",
		"yarn.scheduler.capacity.root.default.accessible-node-labels.gpu.capacity": "0",
	})})
	c := e.client("alice")
	_, err := e.submit(c, subOpts{queue: "default", nodeLabel: "gpu"})
	wantRemote(t, err, yarnerr.InvalidLabelResourceRequest,
		"Invalid resource request, queue=default doesn't have permission to access all labels in resource request. labelExpression of resource request=gpu. Queue labels=")
	if _, err := e.submit(c, subOpts{queue: "b", nodeLabel: "gpu"}); err != nil {
		t.Errorf("a submission to a queue that may use its label: %v", err)
	}
}
