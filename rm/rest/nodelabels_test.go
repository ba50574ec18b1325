package rest

import (
	"net/http"
	"reflect"
	"testing"
)

func TestNodeLabelResourcesAnswerAsRMWebServices(t *testing.T) {
	const gpu = `{"name":"gpu","exclusivity":true}`
	const ssd = `{"name":"ssd","exclusivity":false}`
	runCases(t, []restCase{
		{name: "cluster node labels", method: "GET", target: "/ws/v1/cluster/get-node-labels", status: 200,
			body: `{"nodeLabelsInfo":{"nodeLabelInfo":[{"name":"fpga","exclusivity":true},` + gpu + `,` + ssd + `]}}`},
		{name: "node to labels", method: "GET", target: "/ws/v1/cluster/get-node-to-labels", status: 200,
			body: `{"nodeToLabelsInfo":{"nodeToLabels":{"entry":{"key":"g1:8041","value":{"nodeLabelInfo":[` + gpu + `,` + ssd + `]}},` +
				`"entry":{"key":"g2:8041","value":{"nodeLabelInfo":[` + gpu + `]}}}}}`},
		{name: "every label's nodes", method: "GET", target: "/ws/v1/cluster/label-mappings", status: 200,
			body: `{"labelsToNodesInfo":{"labelsToNodes":{"entry":{"key":` + gpu + `,"value":{"nodes":["g1:8041","g2:8041"]}},` +
				`"entry":{"key":` + ssd + `,"value":{"nodes":["g1:8041"]}}}}}`},
		{name: "the nodes of labels asked", method: "GET", target: "/ws/v1/cluster/label-mappings?labels=ssd&labels=fpga", status: 200,
			body: `{"labelsToNodesInfo":{"labelsToNodes":{"entry":{"key":` + ssd + `,"value":{"nodes":["g1:8041"]}}}}}`},
		{name: "a node's labels", method: "GET", target: "/ws/v1/cluster/nodes/g2:8041/get-labels", status: 200,
			body: `{"nodeLabelsInfo":{"nodeLabelInfo":[` + gpu + `]}}`},
		{name: "a host's labels", method: "GET", target: "/ws/v1/cluster/nodes/g1/get-labels", status: 200,
			body: `{"nodeLabelsInfo":{"nodeLabelInfo":[` + gpu + `,` + ssd + `]}}`},
		{name: "a node without labels", method: "GET", target: "/ws/v1/cluster/nodes/localhost:8141/get-labels", status: 200, body: `{"nodeLabelsInfo":{}}`},
		{name: "a node id with a bad port", method: "GET", target: "/ws/v1/cluster/nodes/g1:x/get-labels", status: http.StatusBadRequest,
			exception: "NumberFormatException", message: `For input string: "x"`},
	})
}

func TestNoNodeLabelsAreEmptyObjects(t *testing.T) {
	f := newFake(t)
	f.labels = nil
	for target, want := range map[string]string{
		"/ws/v1/cluster/get-node-labels":    `{"nodeLabelsInfo":{}}`,
		"/ws/v1/cluster/get-node-to-labels": `{"nodeToLabelsInfo":{"nodeToLabels":{}}}`,
		"/ws/v1/cluster/label-mappings":     `{"labelsToNodesInfo":{"labelsToNodes":{}}}`,
	} {
		if w := serve(t, newServer(t, f), "GET", target, ""); w.Code != 200 || w.Body.String() != want {
			t.Errorf("%s: %d %s, want %s", target, w.Code, w.Body, want)
		}
	}
}

func TestDecodeNodeLabelsReadsBackEveryShape(t *testing.T) {
	labels := newFake(t).labels
	withNodes := labels[1:] // fpga is on no node: only the cluster's list names it
	for _, tt := range []struct {
		name string
		body any
		want []NodeLabel
	}{
		{"cluster labels", NodeLabelsBody(labels), []NodeLabel{{Name: "fpga", Exclusive: true}, {Name: "gpu", Exclusive: true}, {Name: "ssd"}}},
		{"node to labels", NodeToLabelsBody(labels), withNodes},
		{"labels to nodes", LabelsToNodesBody(labels, nil), withNodes},
		{"one label to one node", LabelsToNodesBody(labels, []string{"ssd"}), labels[2:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeNodeLabels(b)
			if err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestOneOrManyReadsAListOrOneValue(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want []StatItem
	}{
		{``, nil},
		{`null`, nil},
		{`[{"state":"NEW","type":"*","count":1},{"state":"KILLED","type":"*","count":2}]`, []StatItem{{"NEW", "*", 1}, {"KILLED", "*", 2}}},
		{`{"state":"RUNNING","type":"yarn","count":3}`, []StatItem{{"RUNNING", "yarn", 3}}},
	} {
		got, err := OneOrMany[StatItem]([]byte(tt.raw))
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v %v", tt.raw, got, err)
		}
	}
	if _, err := OneOrMany[StatItem]([]byte(`"x"`)); err == nil {
		t.Error("a string read as items")
	}
}
