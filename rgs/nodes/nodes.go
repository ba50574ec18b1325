package nodes

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

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
	// Selector, if not empty, are the labels of the RM's own nodes
	// (knit-rm's --node-selector): the view holds only the nodes that
	// carry them all, so node reports, cluster metrics and the
	// federation's capacity count the RM's pool alone.
	Selector map[string]string
}

// Info is one node as YARN's NodeReport shows it: what the ResourceManager's
// NodeLister returns (Info is this type).
type Info struct {
	Name             string
	Host             string
	NMPort           int32
	HTTPAddress      string
	Rack             string
	State            yarnpb.NodeStateProto
	CapabilityMB     int64
	CapabilityVcores int32
	UsedMB           int64
	UsedVcores       int32
	Containers       int32
	Labels           []string
	// Partition is the node's node-label partition, its
	// launch.NodeLabelPartition label; "" is the default partition.
	Partition        string
	HealthReport     string
	LastHealthUpdate time.Time
	// Utilization is what knit-node last measured of the node and its
	// containers, and the machine's physical memory and processors
	// (Utilization.Physical, zero when an older knit-node published
	// none), from launch.AnnotationUtilization; zero when it published
	// none, as an NM that has not reported.
	Utilization launch.NodeUtilization

	// shared is the report the node view built for this very Info, if it
	// did (SharedReport).
	shared *yarnpb.NodeReportProto
}

// SharedReport is the node's NodeReport as Report builds it, shared with
// every other caller listing the same node while it has not changed: the
// caller must not modify it (Report gives a copy of its own).
func (n Info) SharedReport() *yarnpb.NodeReportProto {
	if n.shared != nil {
		return n.shared
	}
	return n.Report()
}

// Report is the node's NodeReport.
func (n Info) Report() *yarnpb.NodeReportProto {
	r := &yarnpb.NodeReportProto{
		NodeId:               &yarnpb.NodeIdProto{Host: proto.String(n.Host), Port: proto.Int32(n.NMPort)},
		HttpAddress:          proto.String(n.HTTPAddress),
		RackName:             proto.String(n.Rack),
		Used:                 yarnpb.NewResource(n.UsedMB, n.UsedVcores),
		Capability:           yarnpb.NewResource(n.CapabilityMB, n.CapabilityVcores),
		NodeState:            n.State.Enum(),
		HealthReport:         proto.String(n.HealthReport),
		LastHealthReportTime: proto.Int64(n.LastHealthUpdate.UnixMilli()),
		NodeLabels:           n.Labels,
	}
	if len(n.Labels) == 0 && n.Partition != "" {
		// The node's YARN node labels are its partition's.
		r.NodeLabels = []string{n.Partition}
	}
	if n.LastHealthUpdate.IsZero() {
		r.LastHealthReportTime = proto.Int64(0)
	}
	if n.Containers != 0 {
		// A Java RM leaves numContainers out when it is 0 (§40).
		r.NumContainers = proto.Int32(n.Containers)
	}
	if n.Utilization != (launch.NodeUtilization{}) {
		// An RMNode holds both once its NM has sent one heartbeat, and
		// neither before: a node knit-node has not measured has none.
		r.NodeUtilization = n.Utilization.Node.Proto()
		r.ContainersUtilization = n.Utilization.Containers.Proto()
	}
	return r
}

// Lister answers the ResourceManager's node listing (rm.NodeLister) from
// indexes that the node and pod informers' events keep: listing the nodes
// costs O(nodes), counting them O(1), and neither walks the pods.
type Lister struct {
	cfg   Config
	nodes corelisters.NodeLister
	view  *view
	sync  []cache.InformerSynced
}

// New makes a Lister of the nodes, and of Knit's pods from podFactory (one
// watching pods labelled launch.LabelApplication, shared with RGS), whose
// informers start with the factories' Start; call WaitForSync before
// serving.
func New(client kubernetes.Interface, podFactory informers.SharedInformerFactory, cfg Config) (*Lister, informers.SharedInformerFactory, error) {
	var opts []informers.SharedInformerOption
	if len(cfg.Selector) > 0 {
		selector := labels.SelectorFromSet(cfg.Selector).String()
		opts = append(opts, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	nodeInformer := nodeFactory.Core().V1().Nodes()
	l := &Lister{cfg: cfg, nodes: nodeInformer.Lister()}
	l.view = newView(l.report)
	// The registrations' HasSynced, not the informers': the indexes are
	// whole only once the handlers have seen every object of the first
	// list.
	nodeReg, err := nodeInformer.Informer().AddEventHandler(l.view.nodeHandler())
	if err != nil {
		return nil, nil, fmt.Errorf("nodes: node informer: %w", err)
	}
	podReg, err := podFactory.Core().V1().Pods().Informer().AddEventHandler(l.view.podHandler())
	if err != nil {
		return nil, nil, fmt.Errorf("nodes: pod informer: %w", err)
	}
	l.sync = []cache.InformerSynced{nodeReg.HasSynced, podReg.HasSynced}
	return l, nodeFactory, nil
}

// WaitForSync blocks until both indexes hold what the caches do.
func (l *Lister) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), l.sync...) {
		return fmt.Errorf("nodes: caches not synced: %w", ctx.Err())
	}
	return nil
}

// Nodes lists every node with the use of Knit's pods bound to it, in no
// order.
func (l *Lister) Nodes(context.Context) ([]Info, error) {
	return l.view.list(), nil
}

// EncodedReports is the encoded report of every node in one of states
// (every node when none), each as one element of the repeated message
// field numbered field (a response's list of NodeReports), in no order:
// the answer to getClusterNodes in parts to be sent one after the other,
// without building or encoding again the reports of nodes that have not
// changed, and without walking the nodes at all while nothing has. The
// parts are shared: callers must not modify them.
func (l *Lister) EncodedReports(field protowire.Number, states []yarnpb.NodeStateProto) ([][]byte, error) {
	return l.view.encodedReportParts(field, states)
}

// Census counts the nodes by state and sums the capability and use of the
// running ones, without listing them.
func (l *Lister) Census(context.Context) (Census, error) {
	return l.view.snapshotCensus(), nil
}

func (l *Lister) report(n *corev1.Node) Info {
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
	info := Info{
		Name:             n.Name,
		Host:             host,
		NMPort:           l.cfg.NMPort,
		HTTPAddress:      host + ":" + strconv.Itoa(int(l.cfg.NMWebPort)),
		Rack:             rack,
		State:            State(n),
		CapabilityMB:     n.Status.Allocatable.Memory().Value() >> 20,
		CapabilityVcores: int32(n.Status.Allocatable.Cpu().Value()),
		Partition:        n.Labels[launch.NodeLabelPartition],
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			info.HealthReport = c.Message
			info.LastHealthUpdate = c.LastHeartbeatTime.Time
		}
	}
	if v, ok := n.Annotations[launch.AnnotationUtilization]; ok {
		// A value that does not decode is shown as none: the node's
		// report stays whole either way.
		if u, err := launch.DecodeUtilization(v); err == nil {
			info.Utilization = u
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
	info, ok := l.view.node(nodeName)
	if !ok {
		return nil, "", false
	}
	return &yarnpb.NodeIdProto{Host: proto.String(info.Host), Port: proto.Int32(info.NMPort)}, info.HTTPAddress, true
}

// NodeName finds the Kubernetes node an AM means by a host in its asks or
// blacklist: a node name, or any of a node's addresses (NodeIds carry the
// InternalIP or the hostname).
func (l *Lister) NodeName(host string) (string, bool) {
	return l.view.nameOf(host)
}

// LogAggregation returns the log aggregation statuses knit-node publishes
// on the node (application id → LogAggregationStatus name); none when it
// publishes none.
func (l *Lister) LogAggregation(nodeName string) map[string]string {
	n, err := l.nodes.Get(nodeName)
	if err != nil {
		return nil
	}
	statuses, err := launch.DecodeLogAggregation(n.Annotations[launch.AnnotationLogAggregation])
	if err != nil {
		return nil
	}
	return statuses
}

// AuxServices returns the aux services knit-node runs on the node and their
// metadata, as it publishes them on its Node; none when it publishes none.
func (l *Lister) AuxServices(nodeName string) map[string][]byte {
	n, err := l.nodes.Get(nodeName)
	if err != nil {
		return nil
	}
	v, ok := n.Annotations[launch.AnnotationAuxServices]
	if !ok {
		return nil
	}
	services, err := launch.DecodeAuxServices(v)
	if err != nil {
		return nil
	}
	return services
}
