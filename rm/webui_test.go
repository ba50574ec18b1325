package rm

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/webui"
	"github.com/knitdev/knit/scheduling"
)

type fixedPods map[yarnid.ContainerID]*corev1.Pod

func (f fixedPods) ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool) {
	p, ok := f[id]
	return p, ok
}

// TestWebUIShowsContainersWithTheirPodsNodesAndQueues: the web pages' view
// of the RM names each container's pod and log link, to users with
// VIEW_APP only, each node's Kubernetes node, and every queue.
func TestWebUIShowsContainersWithTheirPodsNodesAndQueues(t *testing.T) {
	e := newEnv(t, envOptions{aclEnable: true, scheduler: &recordingScheduler{}})
	attempt, _ := unmanagedAM(t, e)
	id := yarnid.ContainerID{Attempt: attempt, Epoch: 0, Sequence: 2}
	ctr := &yarnpb.ContainerProto{Id: id.Proto(), NodeId: &yarnpb.NodeIdProto{Host: proto.String("node1"), Port: proto.Int32(8041)},
		NodeHttpAddress: proto.String("node1:8042"),
		Resource:        yarnpb.NewResource(1024, 1), Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}}
	if err := e.rm.SchedulerSink().Allocated(t.Context(), scheduling.Allocation{Role: launch.RoleTask, Container: ctr}); err != nil {
		t.Fatal(err)
	}
	ui := e.rm.WebUI(fixedPods{id: {ObjectMeta: metav1.ObjectMeta{Namespace: "knit-default", Name: "app-1700000000000-0001-01-task-abcdefgh"}}})

	got, err := ui.Containers(t.Context(), "alice", attempt.App.String())
	if err != nil || len(got) != 1 {
		t.Fatalf("containers: %v %v", got, err)
	}
	c := got[0]
	if c.Pod != "app-1700000000000-0001-01-task-abcdefgh" || c.Namespace != "knit-default" || c.AM ||
		c.Report.GetLogUrl() != "http://node1:8042/node/containerlogs/"+id.String()+"/alice" {
		t.Errorf("container: %+v", c)
	}
	if _, err := ui.Containers(t.Context(), "mallory", attempt.App.String()); err == nil {
		t.Error("a user without VIEW_APP saw the containers")
	}

	nodes, err := ui.Nodes(t.Context())
	if err != nil || len(nodes) != 2 || nodes[0].KubeNode != "n1" || nodes[1].Report.GetHealthReport() != "disk full" {
		t.Errorf("nodes: %v %v", nodes, err)
	}
	qs, err := ui.Queues(t.Context())
	if err != nil || len(qs) < 2 || qs[0].Path != "root" || qs[0].Depth != 0 {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	for _, q := range qs[1:] {
		if q.Depth != 1 || !q.Leaf || q.AbsoluteMaxCapacity <= 0 {
			t.Errorf("queue %+v", q)
		}
	}
}

func TestWebUIQueuesCarryEachLabelledPartitionsFigures(t *testing.T) {
	e := labelledEnv(t, "gpu")
	qs, err := e.rm.WebUI(fixedPods{}).Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]webui.Queue{}
	for _, q := range qs {
		byPath[q.Path] = q
	}
	tests := []struct {
		name, queue string
		want        []webui.QueuePartition
	}{
		{"b: its AM and a task in gpu, 3 of the partition's 16 GiB", "root.b", []webui.QueuePartition{{
			Name: "gpu", TotalMB: 16384, TotalVcores: 16, Capacity: 100, MaxCapacity: 100, AbsoluteCapacity: 100, AbsoluteMaxCapacity: 100,
			Used: 18.75, AbsoluteUsed: 18.75, UsedMB: 3072, UsedVcores: 3, AMUsedMB: 1024, Containers: 2}}},
		{"root: gpu as its configuration names it, its leaves' use summed", "root", []webui.QueuePartition{{
			Name: "gpu", TotalMB: 16384, TotalVcores: 16, Capacity: 100, MaxCapacity: 100, AbsoluteCapacity: 100, AbsoluteMaxCapacity: 100,
			Used: 18.75, AbsoluteUsed: 18.75, UsedMB: 3072, UsedVcores: 3, AMUsedMB: 1024, Containers: 2}}},
		{"default: no labelled partition", "root.default", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := byPath[tt.queue]
			if !slices.Equal(q.Partitions, tt.want) {
				t.Errorf("%s's partitions %+v, want %+v", tt.queue, q.Partitions, tt.want)
			}
		})
	}
	// The rows' own figures are the default partition's: b's 1 GiB task.
	if b := byPath["root.b"]; b.AllocatedMB != 1024 || b.Containers != 1 || b.Used != 25 {
		t.Errorf("b's default partition row: %+v", b)
	}
}
