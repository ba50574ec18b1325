// Package nodes shows Kubernetes nodes to YARN clients: each node becomes a
// NodeReport whose capability is the node's allocatable, whose use is the sum
// of the requests of Knit's pods bound to it, and whose rack is its topology
// zone.
package nodes

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm"
)

// ApplicationLabel marks every pod Knit runs for a YARN application.
const ApplicationLabel = "knit.io/application"

// zoneLabel is where Kubernetes keeps the failure domain YARN calls a rack.
const zoneLabel = "topology.kubernetes.io/zone"

// defaultRack is YARN's rack for a node the topology script knows nothing of.
const defaultRack = "/default-rack"

// Config says how node ids are formed.
type Config struct {
	// NMPort and NMWebPort are the ports knit-node serves on every node; a
	// NodeId is <host>:<NMPort>.
	NMPort, NMWebPort int32
	// UseHostname takes the node's Hostname address as its NodeId host
	// instead of its InternalIP.
	UseHostname bool
}

// Lister answers rm.NodeLister from informer caches.
type Lister struct {
	cfg   Config
	nodes corelisters.NodeLister
	pods  corelisters.PodLister
	sync  []cache.InformerSynced
}

// New makes a Lister of the nodes, and of Knit's pods from podFactory (one
// watching pods labelled ApplicationLabel, shared with RGS), whose
// informers start with the factories' Start; call WaitForSync before
// serving.
func New(client kubernetes.Interface, podFactory informers.SharedInformerFactory, cfg Config) (*Lister, informers.SharedInformerFactory) {
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := nodeFactory.Core().V1().Nodes()
	podInformer := podFactory.Core().V1().Pods()
	l := &Lister{
		cfg:   cfg,
		nodes: nodeInformer.Lister(),
		pods:  podInformer.Lister(),
		sync:  []cache.InformerSynced{nodeInformer.Informer().HasSynced, podInformer.Informer().HasSynced},
	}
	return l, nodeFactory
}

// WaitForSync blocks until both caches are filled.
func (l *Lister) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), l.sync...) {
		return fmt.Errorf("nodes: caches not synced: %w", ctx.Err())
	}
	return nil
}

// Nodes implements rm.NodeLister.
func (l *Lister) Nodes(context.Context) ([]rm.NodeInfo, error) {
	nodes, err := l.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("nodes: list: %w", err)
	}
	req, err := labels.NewRequirement(ApplicationLabel, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("nodes: selector: %w", err)
	}
	pods, err := l.pods.List(labels.NewSelector().Add(*req))
	if err != nil {
		return nil, fmt.Errorf("nodes: pods: %w", err)
	}
	usage := map[string]*rm.NodeInfo{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := usage[p.Spec.NodeName]
		if u == nil {
			u = &rm.NodeInfo{}
			usage[p.Spec.NodeName] = u
		}
		for _, c := range p.Spec.Containers {
			u.UsedMB += c.Resources.Requests.Memory().Value() >> 20
			u.UsedVcores += int32(c.Resources.Requests.Cpu().Value())
		}
		u.Containers++
	}
	out := make([]rm.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		info := l.report(n)
		if u := usage[n.Name]; u != nil {
			info.UsedMB, info.UsedVcores, info.Containers = u.UsedMB, u.UsedVcores, u.Containers
		}
		out = append(out, info)
	}
	return out, nil
}

func (l *Lister) report(n *corev1.Node) rm.NodeInfo {
	host := address(n, corev1.NodeInternalIP)
	if l.cfg.UseHostname || host == "" {
		if h := address(n, corev1.NodeHostName); h != "" {
			host = h
		}
	}
	rack := defaultRack
	if zone := n.Labels[zoneLabel]; zone != "" {
		rack = "/" + zone
	}
	info := rm.NodeInfo{
		Name:             n.Name,
		Host:             host,
		NMPort:           l.cfg.NMPort,
		HTTPAddress:      host + ":" + strconv.Itoa(int(l.cfg.NMWebPort)),
		Rack:             rack,
		State:            State(n),
		CapabilityMB:     n.Status.Allocatable.Memory().Value() >> 20,
		CapabilityVcores: int32(n.Status.Allocatable.Cpu().Value()),
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			info.HealthReport = c.Message
			info.LastHealthUpdate = c.LastHeartbeatTime.Time
		}
	}
	return info
}

// State maps a node's conditions to YARN's node state: Ready is RUNNING, a
// cordoned node is DECOMMISSIONING (it finishes what it runs and takes
// nothing new, like a YARN node being decommissioned gracefully), a node
// whose kubelet is silent is LOST, and one that says it is not ready is
// UNHEALTHY.
func State(n *corev1.Node) yarnpb.NodeStateProto {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		switch {
		case c.Status == corev1.ConditionUnknown:
			return yarnpb.NodeStateProto_NS_LOST
		case c.Status == corev1.ConditionFalse:
			return yarnpb.NodeStateProto_NS_UNHEALTHY
		case n.Spec.Unschedulable:
			return yarnpb.NodeStateProto_NS_DECOMMISSIONING
		default:
			return yarnpb.NodeStateProto_NS_RUNNING
		}
	}
	return yarnpb.NodeStateProto_NS_NEW
}

func address(n *corev1.Node, kind corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == kind {
			return a.Address
		}
	}
	return ""
}

// NodeID is the YARN NodeId and HTTP address of a Kubernetes node, for
// the containers RGS makes from pods bound to it.
func (l *Lister) NodeID(nodeName string) (*yarnpb.NodeIdProto, string, bool) {
	n, err := l.nodes.Get(nodeName)
	if err != nil {
		return nil, "", false
	}
	info := l.report(n)
	return &yarnpb.NodeIdProto{Host: proto.String(info.Host), Port: proto.Int32(info.NMPort)}, info.HTTPAddress, true
}

// NodeName finds the Kubernetes node an AM means by a host in its asks or
// blacklist: a node name, or any of a node's addresses (NodeIds carry the
// InternalIP or the hostname).
func (l *Lister) NodeName(host string) (string, bool) {
	if _, err := l.nodes.Get(host); err == nil {
		return host, true
	}
	nodes, err := l.nodes.List(labels.Everything())
	if err != nil {
		return "", false
	}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Address == host {
				return n.Name, true
			}
		}
	}
	return "", false
}
