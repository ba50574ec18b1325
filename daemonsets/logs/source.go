package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// ExitInvalid is ContainerExitStatus.INVALID, the exit code of a
// container that has not ended.
const ExitInvalid = -1000

// Container is what the node knows of one container from its pod.
type Container struct {
	ID   string
	App  string
	User string
	// State is the NodeManager's ContainerState name: NEW, LOCALIZING,
	// RUNNING or DONE.
	State         string
	ExitCode      int32
	Diagnostics   string
	MemoryMB      int64
	VCores        int64
	ExecutionType string
}

// Running reports whether the container may still write to its logs.
func (c Container) Running() bool { return c.State != "DONE" }

// Source lists the containers whose pods are bound to the node.
type Source interface {
	Containers() []Container
}

// CapacitySource is a Source that also knows what the node offers
// containers (memory in MiB, vcores), for /ws/v1/node/info.
type CapacitySource interface {
	Source
	Capacity() (memoryMB, vcores int64, ok bool)
}

// PodSource is the Source of a node's pods, read from an informer. It
// also keeps each application's owner and ACLs beside its logs the first
// time it sees one of its started containers.
type PodSource struct {
	dirs    Dirs
	log     *slog.Logger
	factory informers.SharedInformerFactory
	lister  corelisters.PodLister
	synced  toolscache.InformerSynced

	nodeName    string
	nodeFactory informers.SharedInformerFactory
	nodes       corelisters.NodeLister
}

var _ CapacitySource = (*PodSource)(nil)

// NewPodSource watches the Knit pods bound to nodeName.
func NewPodSource(client kubernetes.Interface, nodeName string, dirs Dirs, log *slog.Logger) (*PodSource, error) {
	if client == nil || nodeName == "" {
		return nil, errors.New("logs: a client and a node name are required")
	}
	if log == nil {
		log = slog.Default()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
			o.LabelSelector = launch.LabelContainer
		}))
	inf := factory.Core().V1().Pods()
	s := &PodSource{dirs: dirs, log: log, factory: factory, lister: inf.Lister(), synced: inf.Informer().HasSynced, nodeName: nodeName}
	s.nodeFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
		}))
	s.nodes = s.nodeFactory.Core().V1().Nodes().Lister()
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			s.record(p)
		}
	}
	if _, err := inf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, fmt.Errorf("logs: pod handler: %w", err)
	}
	return s, nil
}

// Run watches until ctx ends.
func (s *PodSource) Run(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	s.nodeFactory.Start(ctx.Done())
	defer s.nodeFactory.Shutdown()
	<-ctx.Done()
	return nil
}

// Capacity is the node's allocatable memory and CPU (whole cores as
// vcores).
func (s *PodSource) Capacity() (int64, int64, bool) {
	n, err := s.nodes.Get(s.nodeName)
	if err != nil {
		return 0, 0, false
	}
	a := n.Status.Allocatable
	return a.Memory().Value() >> 20, a.Cpu().MilliValue() / 1000, true
}

// Containers lists the node's containers; before the first sync, none.
func (s *PodSource) Containers() []Container {
	if !s.synced() {
		return nil
	}
	pods, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []Container
	for _, p := range pods {
		if c, ok := containerOfPod(p); ok {
			out = append(out, c)
		}
	}
	return out
}

// Pods lists the node's container pods from the informer's cache; before
// the first sync, none. The pods are shared: callers must not change them.
func (s *PodSource) Pods() []*corev1.Pod {
	if !s.synced() {
		return nil
	}
	pods, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	return pods
}

// record keeps the application's owner and ACLs beside its logs, from
// the first of its started containers seen (the file's presence is the
// only state: nothing grows in memory with the applications).
func (s *PodSource) record(p *corev1.Pod) {
	v, ok := p.Annotations[launch.AnnotationContext]
	if !ok {
		return
	}
	lc, err := launch.DecodeContext(v)
	if err != nil {
		return
	}
	id, err := yarnid.ParseContainerID(lc.ContainerID)
	if err != nil {
		return
	}
	app := id.Attempt.App.String()
	// Only once the localizer has made the container's log folder, and so
	// never for an application whose logs are gone already (a late event
	// of one of its pods).
	if s.dirs.HasRecord(app) || !s.dirs.hasContainer(app, lc.ContainerID) {
		return
	}
	rec := AppRecord{Owner: lc.User, ACLs: ACLsOfLaunchContext(lc.LaunchContext)}
	if v, ok := p.Annotations[launch.AnnotationLogAggregationContext]; ok {
		lac, err := launch.DecodeLogAggregationContext(v)
		if err != nil {
			s.log.Warn("log aggregation context of the application's pod; every log file will be aggregated", "app", app, "pod", p.Name, "err", err)
		} else {
			rec.LogAggregation = &lac
		}
	}
	if err := s.dirs.SetRecord(app, rec); err != nil {
		s.log.Warn("keep application owner and ACLs", "app", app, "err", err)
	}
}

// ACLsOfLaunchContext returns the application ACLs of an encoded
// ContainerLaunchContextProto, in YARN's names (VIEW_APP, MODIFY_APP).
func ACLsOfLaunchContext(b []byte) []aggregated.ACL {
	var clc yarnpb.ContainerLaunchContextProto
	if proto.Unmarshal(b, &clc) != nil {
		return nil
	}
	var out []aggregated.ACL
	for _, a := range clc.GetApplication_ACLs() {
		t := "VIEW_APP"
		if a.GetAccessType() == yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP {
			t = "MODIFY_APP"
		}
		out = append(out, aggregated.ACL{Type: t, Value: a.GetAcl()})
	}
	return out
}

// containerOfPod reads a container from its pod; ok is false for a pod
// that is no allocated container.
func containerOfPod(p *corev1.Pod) (Container, bool) {
	var c Container
	var lc launch.Context
	if v, ok := p.Annotations[launch.AnnotationContext]; ok {
		if d, err := launch.DecodeContext(v); err == nil {
			lc = d
		}
	}
	c.ID = lc.ContainerID
	if c.ID == "" {
		c.ID = original(p, launch.LabelContainer)
	}
	id, err := yarnid.ParseContainerID(c.ID)
	if err != nil {
		return c, false
	}
	c.App = id.Attempt.App.String()
	c.User = lc.User
	if c.User == "" {
		c.User = original(p, launch.LabelUser)
	}
	c.ExecutionType = "GUARANTEED"
	if v := p.Annotations[launch.AnnotationExecutionType]; v != "" {
		c.ExecutionType = v
	}
	c.ExitCode = ExitInvalid
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		c.State = "DONE"
		for _, st := range p.Status.ContainerStatuses {
			if t := st.State.Terminated; t != nil {
				c.ExitCode, c.Diagnostics = t.ExitCode, t.Message
				break
			}
		}
	case p.Status.Phase == corev1.PodRunning:
		c.State = "RUNNING"
	case lc.ContainerID != "":
		c.State = "LOCALIZING"
	default:
		c.State = "NEW"
	}
	var memBytes, milli int64
	for _, ctr := range p.Spec.Containers {
		memBytes += ctr.Resources.Requests.Memory().Value()
		milli += ctr.Resources.Requests.Cpu().MilliValue()
	}
	c.MemoryMB = memBytes >> 20
	c.VCores = int64(math.Ceil(float64(milli) / 1000))
	return c, true
}

// original is a label's exact value: the annotation of the same key when
// the label had to be sanitised, else the label.
func original(p *corev1.Pod, key string) string {
	if v, ok := p.Annotations[key]; ok {
		return v
	}
	return p.Labels[key]
}
