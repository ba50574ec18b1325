package rm

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/webui"
)

// ContainerPods finds the pod that runs an allocated container (RGS's pod
// informer cache): the fields the RM keeps of it, in a pod of the
// caller's own.
type ContainerPods interface {
	ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool)
}

// WebUI returns the RM as the web pages' Cluster: the REST API's answers
// (same ACLs), plus the containers of an application with their pods (pods
// may be nil: no pod is then named), the nodes with their Kubernetes node
// and the queues. Call it once, when the RM starts serving.
func (rm *ResourceManager) WebUI(pods ContainerPods) webui.Cluster {
	return &webUI{restCluster: rm.REST().(*restCluster), pods: pods}
}

type webUI struct {
	*restCluster
	pods ContainerPods
}

var _ webui.Cluster = (*webUI)(nil)

// Containers lists every container the application has had, to a user with
// VIEW_APP on it.
func (w *webUI) Containers(ctx context.Context, user, id string) ([]webui.Container, error) {
	p, err := parseAppID(id)
	if err != nil {
		return nil, err
	}
	appID, err := yarnid.ApplicationIDFromProto(p)
	if err != nil {
		return nil, err
	}
	e, err := w.rm.viewable(as(ctx, user), appID, "application "+id)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	var out []webui.Container
	for _, c := range e.app.Containers() {
		wc := webui.Container{Report: c.Report(), AM: c.IsAM()}
		if w.pods != nil {
			if pod, ok := w.pods.ContainerPod(c.ID()); ok {
				wc.Namespace, wc.Pod = pod.Namespace, pod.Name
			}
		}
		out = append(out, wc)
	}
	return out, nil
}

// Nodes lists every node with the Kubernetes node behind it.
func (w *webUI) Nodes(ctx context.Context) ([]webui.Node, error) {
	list, err := w.rm.nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]webui.Node, 0, len(list))
	for _, n := range list {
		out = append(out, webui.Node{Report: n.SharedReport(), KubeNode: n.Name})
	}
	return out, nil
}

// Queues lists the queues depth first with their configuration and use.
func (w *webUI) Queues(ctx context.Context) ([]webui.Queue, error) {
	tree := w.rm.queueTree()
	root := tree.Root()
	ctx = internal(ctx)
	view := w.rm.queueView(ctx)
	resp, err := w.rm.queueInfo(ctx, &yarnpb.GetQueueInfoRequestProto{
		QueueName: proto.String(root.Path), IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(true),
	}, tree, view)
	if err != nil {
		return nil, err
	}
	if resp.GetQueueInfo() == nil {
		return nil, fmt.Errorf("web UI: no queue info for %s", root.Path)
	}
	var out []webui.Queue
	var walk func(info *yarnpb.QueueInfoProto, depth int)
	walk = func(info *yarnpb.QueueInfoProto, depth int) {
		path := info.GetQueuePath()
		if path == "" {
			path = info.GetQueueName()
		}
		st := info.GetQueueStatistics()
		q := webui.Queue{
			Path: path, Name: info.GetQueueName(), Depth: depth, Leaf: len(info.GetChildQueues()) == 0,
			State:       strings.TrimPrefix(info.GetState().String(), "Q_"),
			Capacity:    float64(info.GetCapacity()) * 100,
			MaxCapacity: float64(info.GetMaximumCapacity()) * 100,
			Used:        float64(info.GetCurrentCapacity()) * 100,
			AllocatedMB: st.GetAllocatedMemoryMB(), AllocatedVcores: st.GetAllocatedVCores(),
			Containers: int32(st.GetAllocatedContainers()),
			PendingMB:  st.GetPendingMemoryMB(), PendingVcores: st.GetPendingVCores(), PendingContainers: st.GetPendingContainers(),
			AppsRunning: int32(st.GetNumAppsRunning()), AppsPending: int32(st.GetNumAppsPending()),
		}
		if tq, err := tree.Lookup(path); err == nil {
			q.AbsoluteCapacity = float64(tq.AbsoluteCapacity) * 100
			q.AbsoluteMaxCapacity = float64(tq.AbsoluteMaximumCapacity) * 100
			q.AbsoluteUsed = q.Used * float64(tq.AbsoluteCapacity)
			q.Partitions = webPartitions(view.partitions(tq))
		}
		out = append(out, q)
		for _, ch := range info.GetChildQueues() {
			walk(ch, depth+1)
		}
	}
	walk(resp.GetQueueInfo(), 0)
	return out, nil
}

// webPartitions are a queue's figures in its labelled partitions, for the
// scheduler page's section of each.
func webPartitions(parts []partitionFigure) []webui.QueuePartition {
	var out []webui.QueuePartition
	for _, p := range parts {
		if p.label == "" {
			continue
		}
		c := p.capacity
		out = append(out, webui.QueuePartition{
			Name: p.label, TotalMB: p.whole.MemoryMB, TotalVcores: int64(p.whole.VCores),
			Capacity: float64(c.Capacity) * 100, MaxCapacity: float64(c.MaximumCapacity) * 100,
			AbsoluteCapacity: float64(c.AbsoluteCapacity) * 100, AbsoluteMaxCapacity: float64(c.AbsoluteMaximumCapacity) * 100,
			Used: float64(p.usedCapacity) * 100, AbsoluteUsed: float64(p.absoluteUsed) * 100,
			UsedMB: p.used.MemoryMB, UsedVcores: int64(p.used.VCores), AMUsedMB: p.am.MemoryMB, Containers: p.used.Containers,
			PendingMB: p.pending.memoryMB, PendingVcores: p.pending.vcores, PendingContainers: p.pending.containers,
		})
	}
	return out
}
