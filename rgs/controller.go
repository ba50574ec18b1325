package rgs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
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
	log     *slog.Logger
	pods    corelisters.PodLister
	synced  cache.InformerSynced
	factory informers.SharedInformerFactory
	stop    chan struct{} // closed when Run returns
	limiter flowcontrol.RateLimiter

	podQueue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	bookQueue workqueue.TypedRateLimitingInterface[bookKey]
	// goneQueue carries the ends of deleted pods out of the informer's
	// handler, which must not wait on the Sink.
	goneQueue workqueue.TypedInterface[scheduling.Completion]
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
	admitMu    sync.Mutex
	ungated    map[types.UID]bool
	// lastPreemption is when the last preemption round ran; only the
	// admission worker reads and writes it. nextAdmission is the earliest
	// time (UnixNano) the next pass may start, read by the event handlers.
	lastPreemption time.Time
	nextAdmission  atomic.Int64

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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	factory := cfg.PodFactory
	if factory == nil {
		factory = NewPodInformerFactory(cfg.Client)
	}
	inf := factory.Core().V1().Pods()
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Logger,
		pods:    inf.Lister(),
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
		goneQueue: workqueue.NewTyped[scheduling.Completion](),
		removeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[removal](),
			workqueue.TypedRateLimitingQueueConfig[removal]{Name: "rgs-removals"}),
		books:      map[bookKey]*book{},
		seq:        map[yarnid.AttemptID]int64{},
		containers: map[yarnid.ContainerID]types.NamespacedName{},
		byPod:      map[types.UID]yarnid.ContainerID{},
		reported:   map[yarnid.ContainerID]bool{},
		warned:     map[yarnid.ContainerID]bool{},
		admitQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "rgs-admission"}),
		ungated: map[types.UID]bool{},
		groups:  newPodGroups(),
	}
	enqueue := func(obj any) {
		if p, ok := podOf(obj); ok {
			c.podQueue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			c.queueAdmission()
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if p, ok := podOf(obj); ok {
				c.podGone(p)
				c.queueAdmission()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rgs: pod informer: %w", err)
	}
	return c, nil
}

// NewPodInformerFactory watches Knit's pods, every namespace, each kept as
// StripPod leaves it: the RM keeps every pod in memory and reads a few
// fields of each.
func NewPodInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = launch.LabelApplication }),
		informers.WithTransform(StripPod))
}

func podOf(obj any) (*corev1.Pod, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	return p, ok
}

// StartConfig is what RGS takes from the RM that leads when it starts.
type StartConfig struct {
	// Epoch is the leader's term: it goes into every container id this
	// controller assigns, so ids of different terms never collide.
	Epoch int64
	// Sink hears of everything that happens to pods.
	Sink scheduling.Sink
	// Mapping gives the Kubernetes side of a queue (namespace, scheduler,
	// pod template) at the time a pod is built.
	Mapping func(queue string) Mapping
	// Policy, if set, holds every pod behind a scheduling gate until the
	// queues admit it (admit.go); nil sends pods to the Kubernetes
	// scheduler as created.
	Policy Policy
}

// Start starts the informer and waits for its cache, then rebuilds the books
// and container sequences from the pods that exist: after a restart, the
// pending pods are kept for the AM's resync and the running containers are
// returned, for the RM to recover. Everything that happens to pods from then
// on goes to the Sink.
func (c *Controller) Start(ctx context.Context, sc StartConfig) ([]scheduling.Allocation, error) {
	c.epoch, c.sink, c.mapping, c.policy = sc.Epoch, sc.Sink, sc.Mapping, sc.Policy
	// The informer lives as long as the controller, not as long as ctx,
	// which bounds only the start-up.
	c.factory.Start(c.stop)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return nil, fmt.Errorf("rgs: pod cache not synced: %w", ctx.Err())
	}
	c.listPodGroups(ctx)
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("rgs: list pods: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var running []scheduling.Allocation
	for _, p := range pods {
		attempt, role, ok := attemptOf(p)
		if !ok {
			continue
		}
		if id, ok := containerOf(p); ok {
			c.containers[id] = types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			c.byPod[p.UID] = id
			c.seq[attempt] = max(c.seq[attempt], id.Sequence)
			if cp, err := c.containerProto(p, id); err == nil {
				running = append(running, scheduling.Allocation{Role: role, Container: cp, Created: p.CreationTimestamp.Time})
			}
			continue
		}
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue // bound before the restart: the pod worker allocates it
		}
		k := bookKey{attempt, role}
		b := c.books[k]
		if b == nil {
			b = newBook(scheduling.AttemptSpec{Attempt: attempt, Role: role})
			c.books[k] = b
		}
		b.created++
		b.pending[p.Name] = &pendingPod{namespace: p.Namespace, name: p.Name, hash: p.Labels[launch.LabelAsk], order: b.created}
	}
	return running, nil
}

// Run processes pods and asks until ctx ends. Call Start first.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			done, quit := c.goneQueue.Get()
			if quit {
				return
			}
			c.complete(ctx, done)
			c.mu.Lock()
			delete(c.reported, done.Container)
			delete(c.warned, done.Container)
			c.mu.Unlock()
			c.goneQueue.Done(done)
		}
	})
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
	c.goneQueue.ShutDown()
	c.removeQueue.ShutDown()
	wg.Wait()
	close(c.stop)
	c.factory.Shutdown()
	return ctx.Err()
}

// Ask records the AM's asks (absolute totals per key, as allocate carries
// them) and reconciles the pending pods to them in the background.
func (c *Controller) Ask(spec scheduling.AttemptSpec, asks []*yarnpb.ResourceRequestProto) {
	k := bookKey{spec.Attempt, spec.Role}
	c.mu.Lock()
	b := c.books[k]
	if b == nil {
		b = newBook(spec)
		c.books[k] = b
	}
	b.spec = spec
	b.update(asks)
	c.mu.Unlock()
	c.bookQueue.Add(k)
}

// Blacklist adds and removes hosts the attempt's new pods must avoid.
func (c *Controller) Blacklist(spec scheduling.AttemptSpec, add, remove []string) {
	if len(add) == 0 && len(remove) == 0 {
		return
	}
	k := bookKey{spec.Attempt, spec.Role}
	c.mu.Lock()
	b := c.books[k]
	if b == nil {
		b = newBook(spec)
		c.books[k] = b
	}
	for _, h := range add {
		b.blacklist[h] = true
	}
	for _, h := range remove {
		delete(b.blacklist, h)
	}
	c.mu.Unlock()
}

// ContainerPod returns the pod of an allocated container from the informer's
// cache (RKS reads container state from it: one watch for all of Knit's
// pods). The pod is shared: callers must not change it.
func (c *Controller) ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool) {
	_, p, err := c.cachedPod(id)
	return p, err == nil
}

// ContainerStatus is the NodeManager's view of an allocated container, read
// from its pod: COMPLETE with YARN's exit status and diagnostics once the
// pod has ended (the same as the AM's completed statuses), RUNNING before,
// with the sub-state telling scheduled from running.
func (c *Controller) ContainerStatus(id yarnid.ContainerID) (*yarnpb.ContainerStatusProto, bool) {
	p, ok := c.ContainerPod(id)
	if !ok {
		return nil, false
	}
	st := &yarnpb.ContainerStatusProto{
		ContainerId:   id.Proto(),
		Capability:    resourceOf(p, c.cfg.Resources),
		ExecutionType: executionTypeOf(p).Enum(),
	}
	if done, exit, diag, _ := ended(p); done {
		st.State = yarnpb.ContainerStateProto_C_COMPLETE.Enum()
		st.ContainerSubState = yarnpb.ContainerSubStateProto_CSS_DONE.Enum()
		st.ExitStatus = proto.Int32(exit)
		st.Diagnostics = proto.String(diag)
		return st, true
	}
	st.State = yarnpb.ContainerStateProto_C_RUNNING.Enum()
	st.ContainerSubState = yarnpb.ContainerSubStateProto_CSS_SCHEDULED.Enum()
	st.Diagnostics = proto.String("")
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == launch.ContainerName && s.State.Running != nil {
			st.ContainerSubState = yarnpb.ContainerSubStateProto_CSS_RUNNING.Enum()
		}
	}
	return st, true
}

// deletePod deletes a pod, retrying with backoff; a pod already gone is no
// error. With rv set, the pod is deleted only if unchanged since: a pending
// pod the scheduler has just bound is kept, and becomes a container.
func (c *Controller) deletePod(ctx context.Context, ns, name string, rv *string) error {
	opts := metav1.DeleteOptions{}
	if rv != nil {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: rv}
	}
	op := func() error {
		err := c.cfg.Client.CoreV1().Pods(ns).Delete(ctx, name, opts)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			return backoff.Permanent(err)
		}
		return err
	}
	err := backoff.Retry(op, backoff.WithContext(retryPolicy(), ctx))
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("rgs: delete pod %s/%s: %w", ns, name, err)
	}
	return err
}

func retryPolicy() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = time.Minute
	return b
}

// processBook reconciles one book's pending pods to its asks.
func (c *Controller) processBook(ctx context.Context) bool {
	k, quit := c.bookQueue.Get()
	if quit {
		return false
	}
	defer c.bookQueue.Done(k)
	if err := c.syncBook(ctx, k); err != nil {
		c.log.WarnContext(ctx, "reconciling asks", "attempt", k.attempt.String(), "role", k.role, "err", err)
		c.bookQueue.AddRateLimited(k)
		return true
	}
	c.bookQueue.Forget(k)
	return true
}

type podToCreate struct {
	pod  *corev1.Pod
	hash string
}

func (c *Controller) syncBook(ctx context.Context, k bookKey) error {
	c.mu.Lock()
	b := c.books[k]
	if b == nil || !b.known {
		c.mu.Unlock()
		return nil
	}
	want := b.desired()
	have := b.pendingByHash()
	var create []podToCreate
	var remove []*pendingPod
	var buildErr error
	for h, w := range want {
		for i := len(have[h]); i < w.count; i++ {
			pod, err := c.buildPod(b, w)
			if err != nil {
				buildErr = err
				break
			}
			b.created++
			b.pending[pod.Name] = &pendingPod{namespace: pod.Namespace, name: pod.Name, hash: h, order: b.created}
			create = append(create, podToCreate{pod, h})
		}
	}
	for h, ps := range have {
		if extra := len(ps) - want[h].count; extra > 0 {
			remove = append(remove, ps[:extra]...)
		}
	}
	c.mu.Unlock()

	errs := []error{buildErr}
	// An application's PodGroup exists before its pods.
	if failed, err := c.ensurePodGroups(ctx, create); err != nil {
		errs = append(errs, err)
		kept := create[:0]
		c.mu.Lock()
		for _, p := range create {
			if failed[p.pod.Name] {
				delete(b.pending, p.pod.Name)
			} else {
				kept = append(kept, p)
			}
		}
		c.mu.Unlock()
		create = kept
	}
	errs = append(errs, c.createPods(ctx, b, create)...)
	for _, p := range remove {
		var rv *string
		if cur, err := c.pods.Pods(p.namespace).Get(p.name); err == nil {
			if cur.Spec.NodeName != "" {
				continue // bound meanwhile: the pod worker makes it a container
			}
			rv = &cur.ResourceVersion
		}
		if err := c.deletePod(ctx, p.namespace, p.name, rv); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		c.mu.Lock()
		delete(b.pending, p.name)
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// createPods creates pods concurrently, each after the rate limiter allows.
func (c *Controller) createPods(ctx context.Context, b *book, pods []podToCreate) []error {
	if len(pods) == 0 {
		return nil
	}
	sem := make(chan struct{}, c.cfg.CreateConcurrency)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range pods {
		if err := c.limiter.Wait(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := backoff.Retry(func() error {
				_, err := c.cfg.Client.CoreV1().Pods(p.pod.Namespace).Create(ctx, p.pod, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
					return backoff.Permanent(err)
				}
				return err
			}, backoff.WithContext(retryPolicy(), ctx))
			if err == nil {
				c.cfg.Observer.PodCreated(p.pod.Labels[launch.LabelQueue])
			}
			if err != nil {
				c.cfg.Observer.PodCreateFailed(p.pod.Labels[launch.LabelQueue])
				c.mu.Lock()
				delete(b.pending, p.pod.Name)
				c.mu.Unlock()
				mu.Lock()
				errs = append(errs, fmt.Errorf("rgs: create pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// buildPod makes the pod of one ask of book b. Called with c.mu held.
func (c *Controller) buildPod(b *book, w want) (*corev1.Pod, error) {
	s := b.spec
	req := PodRequest{
		Name:           podName(s.Attempt, s.Role),
		App:            s.Attempt.App.String(),
		Attempt:        s.Attempt.ID,
		Role:           s.Role,
		Queue:          s.Queue,
		User:           s.User,
		Ask:            w.ask,
		LogAggregation: s.LogAggregation,
		Strict:         w.strict,
		Resources:      c.cfg.Resources,
		Mapping:        c.gatedMapping(s.Queue),
		Launcher:       c.cfg.Launcher,
		AskHash:        w.hash,
	}
	if req.Mapping.Delegate == "volcano" && c.cfg.Dynamic != nil {
		req.PodGroup = PodGroupName(s.Attempt.App)
	}
	if req.Ask.GetNodeLabelExpression() == "" && s.NodeLabel != "" {
		req.Ask = proto.CloneOf(req.Ask)
		req.Ask.NodeLabelExpression = proto.String(s.NodeLabel)
	}
	switch {
	case w.key.name == anyName:
	case isRack(w.key):
		req.Rack = w.key.name[1:]
	default:
		if node, ok := c.cfg.Nodes.NodeName(w.key.name); ok {
			req.Hosts = []string{node}
		}
	}
	for h := range b.blacklist {
		if node, ok := c.cfg.Nodes.NodeName(h); ok {
			req.Blacklist = append(req.Blacklist, node)
		}
	}
	return BuildPod(req)
}

// podName names a pod before it has a container: YARN ids with '-' for '_'
// and a random suffix, as a ReplicaSet names its pods.
func podName(attempt yarnid.AttemptID, role string) string {
	return fmt.Sprintf("app-%d-%04d-%02d-%s-%s", attempt.App.ClusterTimestamp, attempt.App.ID, attempt.ID, role, utilrand.String(8))
}

// processPod handles one pod event.
func (c *Controller) processPod(ctx context.Context) bool {
	nn, quit := c.podQueue.Get()
	if quit {
		return false
	}
	defer c.podQueue.Done(nn)
	if err := c.syncPod(ctx, nn); err != nil {
		c.log.WarnContext(ctx, "pod", "pod", nn.String(), "err", err)
		c.podQueue.AddRateLimited(nn)
		return true
	}
	c.podQueue.Forget(nn)
	return true
}

func (c *Controller) syncPod(ctx context.Context, nn types.NamespacedName) error {
	p, err := c.pods.Pods(nn.Namespace).Get(nn.Name)
	if apierrors.IsNotFound(err) {
		return nil // podGone saw it
	}
	if err != nil {
		return err
	}
	attempt, role, ok := attemptOf(p)
	if !ok {
		return nil
	}
	id, allocated := containerOf(p)
	if !allocated {
		c.mu.Lock()
		id, allocated = c.byPod[p.UID]
		c.mu.Unlock()
	}
	if !allocated {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			return nil
		}
		return c.allocate(ctx, p, attempt, role)
	}
	if done, exit, diag, preempted := ended(p); done {
		c.complete(ctx, scheduling.Completion{Container: id, ExitStatus: exit, Diagnostics: diag, Preempted: preempted})
		return nil
	}
	if err := c.syncIncrease(ctx, p, id); err != nil {
		return err
	}
	if disrupted(p) {
		c.mu.Lock()
		first := !c.warned[id]
		c.warned[id] = true
		c.mu.Unlock()
		if first {
			c.sink.Preempting(ctx, scheduling.Preemption{Container: id, Strict: !preemptedByKnit(p), Resource: resourceOf(p, c.cfg.Resources)})
		}
	}
	return nil
}

// allocate makes a bound pod a container: the next sequence number of its
// attempt (1 for the AM), the id on the pod, a signed token, the Sink told.
func (c *Controller) allocate(ctx context.Context, p *corev1.Pod, attempt yarnid.AttemptID, role string) error {
	c.mu.Lock()
	b := c.books[bookKey{attempt, role}]
	if b != nil {
		if _, ok := b.pending[p.Name]; ok {
			delete(b.pending, p.Name)
			b.allocated(p.Labels[launch.LabelAsk])
		}
	}
	var seq int64
	if role == launch.RoleAM {
		seq = 1
	} else {
		c.seq[attempt] = max(c.seq[attempt], 1) + 1
		seq = c.seq[attempt]
	}
	id := yarnid.ContainerID{Attempt: attempt, Epoch: c.epoch, Sequence: seq}
	c.byPod[p.UID] = id
	c.mu.Unlock()

	nn := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	pod, err := c.patchMetadata(ctx, nn, "labels", map[string]*string{launch.LabelContainer: ptr.To(id.String())})
	if err != nil {
		c.mu.Lock()
		delete(c.byPod, p.UID)
		c.mu.Unlock()
	}
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: a lowered ask won the race
	}
	if err != nil {
		return fmt.Errorf("rgs: record container %s on pod: %w", id, err)
	}
	c.mu.Lock()
	c.containers[id] = nn
	c.mu.Unlock()
	var bound time.Time
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
			bound = cond.LastTransitionTime.Time
		}
	}
	cp, err := c.containerProto(pod, id)
	if err == nil {
		err = c.sink.Allocated(ctx, scheduling.Allocation{Role: role, Container: cp, Created: pod.CreationTimestamp.Time, Bound: bound})
	}
	if err != nil {
		c.log.InfoContext(ctx, "allocated container not taken, deleting its pod", "container", id.String(), "err", err)
		return c.deletePod(ctx, p.Namespace, p.Name, nil)
	}
	if !bound.IsZero() {
		c.cfg.Observer.ContainerAllocated(pod.Labels[launch.LabelQueue], max(time.Since(bound), 0))
	}
	if b != nil {
		c.bookQueue.Add(bookKey{attempt, role})
	}
	return nil
}

// Pending is what waits for the Kubernetes scheduler: per queue and user,
// the pods created for asks and not yet bound into containers, and the
// resources they ask for.
type Pending struct {
	Queue, User string
	Pods        int
	MemoryMB    int64
	VCores      int64
}

// Pending reports the pending pods per queue and user, in no order.
func (c *Controller) Pending() []Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := map[[2]string]*Pending{}
	for _, b := range c.books {
		if len(b.pending) == 0 {
			continue
		}
		k := [2]string{b.spec.Queue, b.spec.User}
		p := by[k]
		if p == nil {
			p = &Pending{Queue: k[0], User: k[1]}
			by[k] = p
		}
		for _, pp := range b.pending {
			p.Pods++
			if key, ok := b.byHash[pp.hash]; ok {
				p.MemoryMB += key.group.memoryMB
				p.VCores += int64(key.group.vcores)
			}
		}
	}
	out := make([]Pending, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	return out
}

// containerProto builds the YARN Container of an allocated pod.
func (c *Controller) containerProto(p *corev1.Pod, id yarnid.ContainerID) (*yarnpb.ContainerProto, error) {
	node, http, ok := c.cfg.Nodes.NodeID(p.Spec.NodeName)
	if !ok {
		return nil, fmt.Errorf("rgs: node %q of pod %s/%s unknown", p.Spec.NodeName, p.Namespace, p.Name)
	}
	prio, _ := strconv.ParseInt(p.Labels[launch.LabelPriority], 10, 32)
	allocID := launch.ParseIntLabelValue(p.Labels[launch.LabelAllocationRequestID])
	exec := executionTypeOf(p)
	cp := &yarnpb.ContainerProto{
		Id:                  id.Proto(),
		NodeId:              node,
		NodeHttpAddress:     proto.String(http),
		Resource:            resourceOf(p, c.cfg.Resources),
		Priority:            &yarnpb.PriorityProto{Priority: proto.Int32(int32(prio))},
		ExecutionType:       exec.Enum(),
		AllocationRequestId: proto.Int64(allocID),
		Version:             proto.Int32(intAnnotation(p, launch.AnnotationVersion)),
	}
	var logs *yarnpb.LogAggregationContextProto
	if v, ok := p.Annotations[launch.AnnotationLogAggregationContext]; ok {
		// RGS wrote it; one that no longer decodes was edited by someone
		// else, and the container goes without, as a submission without.
		if lac, err := launch.DecodeLogAggregationContext(v); err == nil {
			logs = lac.Proto()
		}
	}
	tok, err := c.cfg.Signer.Sign(cp, annotationOrLabel(p, launch.LabelUser), p.Spec.NodeSelector[launch.NodeLabelPartition], p.Labels[launch.LabelRole] == launch.RoleAM, logs)
	if err != nil {
		return nil, fmt.Errorf("rgs: container token of %s: %w", id, err)
	}
	cp.ContainerToken = tok
	return cp, nil
}

// annotationOrLabel reads a string label, preferring the exact original kept
// in the annotation of the same key when the label had to be sanitised.
func annotationOrLabel(p *corev1.Pod, key string) string {
	if v, ok := p.Annotations[key]; ok {
		return v
	}
	return p.Labels[key]
}

// resourceOf reads back the YARN capability of a pod from its main
// container's requests.
func resourceOf(p *corev1.Pod, r Resources) *yarnpb.ResourceProto {
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != launch.ContainerName {
			continue
		}
		mem := ctr.Resources.Requests.Memory().Value() >> 20
		per := r.MillicoresPerVcore
		if per <= 0 {
			per = 1000
		}
		vcores := int32(ctr.Resources.Requests.Cpu().MilliValue() / per)
		return yarnpb.NewResource(mem, vcores)
	}
	return yarnpb.NewResource(0, 0)
}

// attemptOf reads a Knit pod's attempt and role from its labels.
func attemptOf(p *corev1.Pod) (yarnid.AttemptID, string, bool) {
	app, err := yarnid.ParseApplicationID(annotationOrLabel(p, launch.LabelApplication))
	if err != nil {
		return yarnid.AttemptID{}, "", false
	}
	n, err := strconv.ParseInt(p.Labels[launch.LabelAttempt], 10, 32)
	if err != nil {
		return yarnid.AttemptID{}, "", false
	}
	role := p.Labels[launch.LabelRole]
	if role != launch.RoleAM {
		role = launch.RoleTask
	}
	return yarnid.AttemptID{App: app, ID: int32(n)}, role, true
}

func containerOf(p *corev1.Pod) (yarnid.ContainerID, bool) {
	v, ok := p.Labels[launch.LabelContainer]
	if !ok {
		return yarnid.ContainerID{}, false
	}
	id, err := yarnid.ParseContainerID(v)
	return id, err == nil
}

// ended reports whether a pod's container is over, with YARN's exit status
// and diagnostics: the main container's exit code and termination message.
func ended(p *corev1.Pod) (done bool, exit int32, diag string, preempted bool) {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return false, 0, "", false
	}
	if p.Status.Reason == "Evicted" || disrupted(p) {
		return true, ExitPreempted, preemptedDiagnostics(p), true
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == launch.ContainerName && s.State.Terminated != nil {
			t := s.State.Terminated
			if stoppedByAM(p) {
				return true, ExitKilledByAppMaster, killedByAMDiagnostics(t.ExitCode), false
			}
			if failure, ok := launch.LocalizationFailure(t.ExitCode, t.Message); ok {
				return true, ExitInvalid, failure, false
			}
			return true, t.ExitCode, t.Message, false
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return true, ExitInvalid, fmt.Sprintf("container setup failed: %s exited with %d: %s", s.Name, t.ExitCode, t.Message), false
		}
	}
	return true, ExitInvalid, p.Status.Message, false
}

// stoppedByAM reports whether the AM stopped the pod's container.
func stoppedByAM(p *corev1.Pod) bool {
	_, ok := p.Annotations[launch.AnnotationStoppedBy]
	return ok
}

// killedByAMDiagnostics is the NodeManager's text for a container the AM
// stopped.
func killedByAMDiagnostics(code int32) string {
	return fmt.Sprintf("Container killed by the ApplicationMaster.\nContainer killed on request. Exit code is %d\n"+
		"Container exited with a non-zero exit code %d. ", code, code)
}

// disrupted reports the DisruptionTarget condition Kubernetes sets on a pod
// it is about to preempt or evict.
func disrupted(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func preemptedDiagnostics(p *corev1.Pod) string {
	if preemptedByKnit(p) {
		return preemptedByScheduler
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return "Container preempted by Kubernetes: " + c.Reason + ": " + c.Message
		}
	}
	return "Container preempted by Kubernetes: " + p.Status.Reason + ": " + p.Status.Message
}

// preemptedByScheduler is SchedulerUtils.PREEMPTED_CONTAINER, the
// diagnostics of a container the queues took back.
const preemptedByScheduler = "Container preempted by scheduler"

// YARN's ContainerExitStatus values RGS reports.
const (
	// ExitInvalid is ContainerExitStatus.INVALID.
	ExitInvalid = -1000
	// ExitAborted is ContainerExitStatus.ABORTED.
	ExitAborted = -100
	// ExitPreempted is ContainerExitStatus.PREEMPTED.
	ExitPreempted = -102
	// ExitKilledByAppMaster is ContainerExitStatus.KILLED_BY_APPMASTER.
	ExitKilledByAppMaster = -105
)

// complete reports a container's end to the Sink once.
func (c *Controller) complete(ctx context.Context, done scheduling.Completion) {
	c.mu.Lock()
	first := !c.reported[done.Container]
	c.reported[done.Container] = true
	c.mu.Unlock()
	if first {
		c.sink.Completed(ctx, done)
	}
}

// podGone handles a deleted pod: a pending one leaves its book (the next
// reconcile makes another if still asked for), an allocated one that never
// ended is reported.
func (c *Controller) podGone(p *corev1.Pod) {
	attempt, role, ok := attemptOf(p)
	if !ok {
		return
	}
	c.mu.Lock()
	if b := c.books[bookKey{attempt, role}]; b != nil {
		if _, ok := b.pending[p.Name]; ok {
			delete(b.pending, p.Name)
			c.bookQueue.Add(bookKey{attempt, role})
		}
	}
	id, allocated := containerOf(p)
	if !allocated {
		id, allocated = c.byPod[p.UID]
	}
	if allocated {
		delete(c.containers, id)
	}
	delete(c.byPod, p.UID)
	c.mu.Unlock()
	if !allocated {
		return
	}
	if done, exit, diag, preempted := ended(p); done {
		c.goneQueue.Add(scheduling.Completion{Container: id, ExitStatus: exit, Diagnostics: diag, Preempted: preempted})
		return
	}
	preempted := disrupted(p) || p.Status.Reason == "Evicted"
	exit, diag := int32(ExitAborted), "Container's pod was deleted"
	if stoppedByAM(p) {
		exit, diag = ExitKilledByAppMaster, killedByAMDiagnostics(143)
	}
	if preempted {
		exit, diag = ExitPreempted, preemptedDiagnostics(p)
	}
	c.goneQueue.Add(scheduling.Completion{Container: id, ExitStatus: exit, Diagnostics: diag, Preempted: preempted, Vanished: true})
}
