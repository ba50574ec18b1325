package rgs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rgs/podrecord"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

// Signer signs the ContainerToken of a new container.
type Signer interface {
	// logs is the application's LogAggregationContext, nil for none.
	Sign(c *yarnpb.ContainerProto, user, nodeLabel string, am bool, logs *yarnpb.LogAggregationContextProto) (*commonpb.TokenProto, error)
}

// Nodes maps between Kubernetes nodes and YARN node ids.
type Nodes interface {
	// NodeID is the YARN NodeId and HTTP address of a Kubernetes node.
	NodeID(nodeName string) (id *yarnpb.NodeIdProto, httpAddress string, ok bool)
	// NodeName finds the node a YARN host name (as asks name hosts) means.
	NodeName(host string) (string, bool)
}

// Config holds what a Controller needs.
type Config struct {
	Client kubernetes.Interface
	// Dynamic writes the PodGroups of queues delegated to Volcano
	// (podgroup.go); nil means none: their pods carry Volcano's queue
	// annotation only. Like Client, the RM builds it fenced.
	Dynamic   dynamic.Interface
	Signer    Signer
	Nodes     Nodes
	Resources Resources
	Launcher  Launcher
	// SubCluster, when the RM is a member of a federation, is its
	// sub-cluster id: every pod carries it (launch.LabelSubCluster), and
	// PodFactory must watch only those pods (NewPodInformerFactory).
	SubCluster string
	// NodeSelector are the labels of the RM's own nodes (knit-rm's
	// --node-selector): every pod's node selector holds them, so that RMs
	// sharing one Kubernetes cluster each place pods on their own pool.
	// Empty means every node.
	NodeSelector map[string]string
	// CreateQPS and CreateBurst rate-limit pod creation, so one AM asking
	// for 10,000 containers cannot starve the API server. Zero means 200/400.
	CreateQPS   float32
	CreateBurst int
	// CreateConcurrency bounds pod creations in flight. Zero means 32.
	CreateConcurrency int
	// Workers process pods and books. Zero means 16: a bound pod costs an
	// API call, and a burst of binds must not wait in line for them.
	Workers int
	// PodFactory, from NewPodInformerFactory, shares the informer of Knit's
	// pods with the rest of the RM; nil means one of RGS's own.
	PodFactory informers.SharedInformerFactory
	// Resync is how often every pod in the cache is checked against what
	// the RM holds (gc.go), so that orphans are found without an event.
	// Zero means a minute.
	Resync time.Duration
	// Observer, if set, learns of pod creations and allocations (the
	// RM's metrics).
	Observer Observer
	Logger   *slog.Logger
}

// Observer learns of RGS's pod work. Its methods run on RGS's workers:
// they must be quick and safe for concurrent use.
type Observer interface {
	// PodCreated: a pod of queue was created for an ask.
	PodCreated(queue string)
	// PodCreateFailed: creating a pod of queue failed for good.
	PodCreateFailed(queue string)
	// ContainerAllocated: a bound pod of queue became a container,
	// bindToContainer after the scheduler bound it (its PodScheduled
	// condition, to the second).
	ContainerAllocated(queue string, bindToContainer time.Duration)
}

type nopObserver struct{}

func (nopObserver) PodCreated(string)                        {}
func (nopObserver) PodCreateFailed(string)                   {}
func (nopObserver) ContainerAllocated(string, time.Duration) {}

// Controller turns asks into pending pods and bound pods into containers,
// as client-go's ReplicaSet controller keeps pods at a count: informer,
// work queues, idempotent syncs.
type Controller struct {
	cfg Config
	// epoch and sink come with Start.
	epoch int64
	sink  scheduling.Sink
	// mapping is the Kubernetes side of a queue, and policy the queues'
	// limits admission follows (nil: no admission), given at Start.
	mapping func(queue string) Mapping
	policy  Policy
	// desired is what the RM holds, given at Start; nil collects nothing
	// (gc.go).
	desired Desired
	log     *slog.Logger
	pods    *podrecord.Lister
	// strip makes records of the pods the API server answers with, as the
	// pod informer's transform (a Stripper of its own) does of the pods it
	// watches.
	strip   *podrecord.Stripper
	synced  cache.InformerSynced
	factory informers.SharedInformerFactory
	stop    chan struct{} // closed when Run returns
	limiter flowcontrol.RateLimiter

	podQueue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	bookQueue workqueue.TypedRateLimitingInterface[bookKey]
	// gone are the last states of deleted pods, which the informer's delete
	// handler keeps for the pod's worker: the cache no longer has them, and
	// a deleted container's end is read from its last state.
	goneMu sync.Mutex
	gone   map[types.NamespacedName]*podrecord.Pod
	// removeQueue carries the RM's removals of pods (removal.go).
	removeQueue workqueue.TypedRateLimitingInterface[removal]

	mu    sync.Mutex
	books map[bookKey]*book
	// seq is the last container sequence number per attempt.
	seq map[yarnid.AttemptID]int64
	// containers are the pods of allocated containers, and byPod the
	// containers of pods: the cache may not show a new container label yet
	// when the pod's next event comes.
	containers map[yarnid.ContainerID]types.NamespacedName
	byPod      map[types.UID]yarnid.ContainerID
	// reported are the containers whose end went to the Sink.
	reported map[yarnid.ContainerID]bool
	warned   map[yarnid.ContainerID]bool

	// admitQueue runs admission passes (admit.go); ungated are the pods
	// whose gate a pass lifted and the cache may not show lifted yet
	// (admission's expectations).
	admitQueue workqueue.TypedRateLimitingInterface[string]
	// waiting is whether a pod waited at the end of the last admission
	// pass (true until the first): passes go on only while one does.
	waiting atomic.Bool
	admitMu sync.Mutex
	ungated map[types.UID]bool
	// admitted are the pods admission let go that are not yet containers
	// (admitted.go).
	admitted *admittedIndex
	// lastPreemption is when the last preemption round ran; only the
	// admission worker reads and writes it. nextAdmission is the earliest
	// time (UnixNano) the next pass may start, read by the event handlers.
	lastPreemption time.Time
	nextAdmission  atomic.Int64

	// expect are the pods created or deleted that the cache may not show
	// so yet (expectations.go).
	expect *podExpectations

	// orphans are the pods seen not held by the RM, and since when (gc.go).
	orphans *orphans

	// groups are the Volcano PodGroups of applications (podgroup.go).
	groups *podGroups
}

type bookKey struct {
	attempt yarnid.AttemptID
	role    string
}

// New returns a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Signer == nil || cfg.Nodes == nil {
		return nil, errors.New("rgs: Client, Signer and Nodes are required")
	}
	if cfg.CreateQPS == 0 {
		cfg.CreateQPS, cfg.CreateBurst = 200, 400
	}
	if cfg.CreateConcurrency == 0 {
		cfg.CreateConcurrency = 32
	}
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	if cfg.Resync == 0 {
		cfg.Resync = defaultResync
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	factory := cfg.PodFactory
	if factory == nil {
		factory = NewPodInformerFactory(cfg.Client, cfg.SubCluster)
	}
	inf := factory.Core().V1().Pods()
	strip := newStripper()
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Logger,
		pods:    podrecord.NewLister(inf.Informer().GetIndexer(), strip),
		strip:   strip,
		synced:  inf.Informer().HasSynced,
		factory: factory,
		stop:    make(chan struct{}),
		limiter: flowcontrol.NewTokenBucketRateLimiter(cfg.CreateQPS, cfg.CreateBurst),
		podQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "rgs-pods"}),
		bookQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[bookKey](),
			workqueue.TypedRateLimitingQueueConfig[bookKey]{Name: "rgs-asks"}),
		removeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[removal](),
			workqueue.TypedRateLimitingQueueConfig[removal]{Name: "rgs-removals"}),
		gone:       map[types.NamespacedName]*podrecord.Pod{},
		books:      map[bookKey]*book{},
		seq:        map[yarnid.AttemptID]int64{},
		containers: map[yarnid.ContainerID]types.NamespacedName{},
		byPod:      map[types.UID]yarnid.ContainerID{},
		reported:   map[yarnid.ContainerID]bool{},
		warned:     map[yarnid.ContainerID]bool{},
		admitQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "rgs-admission"}),
		ungated:  map[types.UID]bool{},
		admitted: newAdmittedIndex(),
		groups:   newPodGroups(),
		expect:   newPodExpectations(time.Now),
		orphans:  newOrphans(time.Now),
	}
	c.waiting.Store(true)
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		DeleteFunc: c.podDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("rgs: pod informer: %w", err)
	}
	return c, nil
}

// The informer's handlers only queue keys (a deleted pod's last state kept
// for its worker): the workers decide, and no handler waits on a lock held
// long, the Sink or the API server.

// podChanged queues an added or updated pod's key, and an admission pass
// when one could change something: the pod waits, or others did at the
// last pass (the pod's end may make room for them).
func (c *Controller) podChanged(obj any) {
	if p, ok := c.strip.Of(obj); ok {
		c.podQueue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		if c.waiting.Load() || waitingForAdmission(p) {
			c.queueAdmission()
		}
	}
}

// podDeleted keeps a deleted pod's last state, a tombstone's included,
// and queues its key.
func (c *Controller) podDeleted(obj any) {
	if p, ok := c.strip.Of(obj); ok {
		c.goneMu.Lock()
		c.gone[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
		c.goneMu.Unlock()
	}
	c.podChanged(obj)
}

// NewPodInformerFactory watches Knit's pods, every namespace, each kept as
// its record (package podrecord): the RM keeps every pod in memory and
// reads a few fields of each. A non-empty subCluster watches only the pods of that
// federation sub-cluster (Config.SubCluster).
func NewPodInformerFactory(client kubernetes.Interface, subCluster string) informers.SharedInformerFactory {
	selector := podSelector(subCluster)
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(newStripper().Strip))
}

// podSelector is the label selector of the pods of an RM: Knit's pods,
// those of sub-cluster subCluster when it is not empty.
func podSelector(subCluster string) string {
	if subCluster == "" {
		return launch.LabelApplication
	}
	return launch.LabelApplication + "," + launch.LabelSubCluster + "=" + subCluster
}

// newStripper makes the RM's records of pods: the pod contract's
// annotations, and the batch schedulers' queues Knit writes on a delegated
// queue's pods (delegated: such a pod never had Knit's gate).
func newStripper() *podrecord.Stripper {
	return podrecord.NewStripper(YuniKornQueueAnnotation, VolcanoQueueAnnotation)
}

// Run processes pods and asks until ctx ends. Call Start first.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processPod(ctx) {
			}
		})
		wg.Go(func() {
			for c.processBook(ctx) {
			}
		})
		wg.Go(func() {
			for c.processRemoval(ctx) {
			}
		})
	}
	if c.desired != nil {
		wg.Go(func() { c.runSweeps(ctx, c.cfg.Resync) })
	}
	if c.policy != nil {
		c.queueAdmission()
		wg.Go(func() {
			for c.processAdmission(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.podQueue.ShutDown()
	c.bookQueue.ShutDown()
	c.admitQueue.ShutDown()
	c.removeQueue.ShutDown()
	wg.Wait()
	close(c.stop)
	c.factory.Shutdown()
	return ctx.Err()
}
