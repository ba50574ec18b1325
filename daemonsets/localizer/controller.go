package localizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// Preparer readies a started container's work folder (a *Localizer).
type Preparer interface {
	Prepare(ctx context.Context, c launch.Context, credentials []byte) (launch.Files, error)
	Release(containerID string)
	CleanApplication(appID string) error
	Applications() ([]string, error)
}

// ApplicationServices hears of an application's containers starting on the
// node and of its end (the node's aux services, an *auxservice.Host).
type ApplicationServices interface {
	InitializeApplication(ctx context.Context, user string, app yarnid.ApplicationID, serviceData map[string][]byte) error
	StopApplication(ctx context.Context, app yarnid.ApplicationID) error
}

// ApplicationLogs hears of an application's end on the node, to aggregate
// its container logs (the log dirs are apart from the local dirs that
// CleanApplication removes).
type ApplicationLogs interface {
	ApplicationEnded(ctx context.Context, app string) error
}

// ControllerConfig holds what the node's localizer controller needs.
type ControllerConfig struct {
	Client kubernetes.Interface
	// Metadata watches the RM's YarnApplications in ApplicationsNamespace,
	// to end an application on the node when it ends in the RM.
	Metadata              metadata.Interface
	ApplicationsNamespace string
	// Services, if set, hears of application starts and ends.
	Services ApplicationServices
	// Logs, if set, hears of an application's end before its folders go,
	// to aggregate its container logs (a *logs.Aggregator).
	Logs ApplicationLogs
	// AMRMProxy, if set, hears of an application's end, to end its
	// pipelines (the Localizer's Config.AMRMProxy).
	AMRMProxy AMRMProxy
	NodeName  string
	// LaunchDir is the folder knit-launcher waits in (<node root>/launch).
	LaunchDir string
	Preparer  Preparer
	// Workers prepare containers at once; zero means 4.
	Workers int
	Logger  *slog.Logger
}

// Controller watches the pods bound to its node and, for each container
// RKS has started, localizes and hands knit-launcher its launch files: the
// NodeManager's ResourceLocalizationService and ContainerLaunch, driven by
// pod annotations instead of NodeManager events.
type Controller struct {
	cfg     ControllerConfig
	log     *slog.Logger
	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	synced  toolscache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]

	// The RM's applications, read for their state: an application ends on
	// the node when its YarnApplication reaches a final state or goes.
	appFactory metadatainformer.SharedInformerFactory
	appLister  toolscache.GenericLister
	appSynced  toolscache.InformerSynced
	ended      workqueue.TypedRateLimitingInterface[string]

	mu   sync.Mutex
	done map[types.UID]bool // launch files written
	// apps are the applications with folders on this node: found there at
	// start, or given a container since. Only their ends concern the node.
	apps map[string]bool
}

// NewController returns the controller; Run starts it.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Client == nil || cfg.Metadata == nil || cfg.ApplicationsNamespace == "" || cfg.NodeName == "" || cfg.LaunchDir == "" || cfg.Preparer == nil {
		return nil, errors.New("localizer: Client, Metadata, ApplicationsNamespace, NodeName, LaunchDir and Preparer are required")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
			o.LabelSelector = launch.LabelApplication
		}))
	inf := factory.Core().V1().Pods()
	c := &Controller{
		cfg:     cfg,
		log:     cfg.Logger,
		factory: factory,
		pods:    inf.Lister(),
		synced:  inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "localizer"}),
		done: map[types.UID]bool{},
		apps: map[string]bool{},
		ended: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "localizer-applications"}),
	}
	c.appFactory = metadatainformer.NewFilteredSharedInformerFactory(cfg.Metadata, 0, cfg.ApplicationsNamespace, nil)
	apps := c.appFactory.ForResource(schema.GroupVersionResource{
		Group: launch.ApplicationGroup, Version: launch.ApplicationVersion, Resource: launch.ApplicationResource,
	})
	c.appLister, c.appSynced = apps.Lister(), apps.Informer().HasSynced
	if _, err := apps.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.applicationChanged,
		UpdateFunc: func(_, obj any) { c.applicationChanged(obj) },
		DeleteFunc: c.applicationGone,
	}); err != nil {
		return nil, fmt.Errorf("localizer: application handler: %w", err)
	}
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			c.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	_, err := inf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: c.podGone,
	})
	if err != nil {
		return nil, fmt.Errorf("localizer: pod handler: %w", err)
	}
	return c, nil
}

// Run serves until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	defer c.ended.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	c.appFactory.Start(ctx.Done())
	defer c.appFactory.Shutdown()
	if !toolscache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("localizer: pod cache: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	// Containers do not wait for the application cache: until the RM has
	// created its resource, there is no application to end anyway.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !toolscache.WaitForCacheSync(ctx.Done(), c.appSynced) {
			return
		}
		c.cleanLeftovers(ctx)
		for c.processEnded(ctx) {
		}
	}()
	for range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.process(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	c.ended.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) process(ctx context.Context) bool {
	nn, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(nn)
	if err := c.sync(ctx, nn); err != nil {
		c.log.WarnContext(ctx, "prepare container", "pod", nn.String(), "err", err)
		c.queue.AddRateLimited(nn)
		return true
	}
	c.queue.Forget(nn)
	return true
}

// sync prepares a started container once: localize, then write the launch
// files, whose presence on disk also marks the work done across restarts.
func (c *Controller) sync(ctx context.Context, nn types.NamespacedName) error {
	p, err := c.pods.Pods(nn.Namespace).Get(nn.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	value, ok := p.Annotations[launch.AnnotationContext]
	if !ok || p.DeletionTimestamp != nil {
		return nil
	}
	if n, ok := p.Annotations[launch.AnnotationThreadDumps]; ok {
		if err := WriteThreadDumps(c.cfg.LaunchDir, string(p.UID), n); err != nil {
			c.log.WarnContext(ctx, "thread dump not passed on", "pod", nn.String(), "err", err)
		}
	}
	c.mu.Lock()
	done := c.done[p.UID]
	c.mu.Unlock()
	path := launch.FilesPath(c.cfg.LaunchDir, string(p.UID))
	if done {
		return nil
	}
	_, statErr := os.Stat(path)
	prepared := statErr == nil
	lc, err := launch.DecodeContext(value)
	if err != nil {
		if prepared {
			c.markDone(p.UID)
			return nil
		}
		// Not ours to retry: the container fails with the reason.
		return c.write(p, launch.Files{ContainerID: p.Labels[launch.LabelContainer], Failure: err.Error()})
	}
	if ctr, err := yarnid.ParseContainerID(lc.ContainerID); err == nil {
		c.mu.Lock()
		c.apps[ctr.Attempt.App.String()] = true
		c.mu.Unlock()
	}
	var creds []byte
	serviceData := map[string][]byte{}
	if lc.TokensSecret != "" {
		s, err := c.cfg.Client.CoreV1().Secrets(p.Namespace).Get(ctx, lc.TokensSecret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("localizer: credentials of %s: %w", lc.ContainerID, err)
		}
		creds = s.Data[launch.SecretKeyTokens]
		for key, v := range s.Data {
			if name, ok := strings.CutPrefix(key, launch.SecretKeyServiceDataPrefix); ok {
				serviceData[name] = v
			}
		}
	}
	// The services learn of the application before its container runs, as
	// the NodeManager's APPLICATION_INIT comes before the launch: a map's
	// output is servable the moment it is written. A container prepared
	// before knit-node restarted tells them again, since they keep nothing
	// across a restart.
	if err := c.initializeApplication(ctx, lc, serviceData); err != nil {
		return err
	}
	if prepared {
		c.markDone(p.UID)
		return nil
	}
	start := time.Now()
	files, err := c.cfg.Preparer.Prepare(ctx, lc, creds)
	if err != nil {
		return err
	}
	if err := c.write(p, files); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "container prepared", "container", lc.ContainerID, "pod", nn.String(),
		"took", time.Since(start).String(), "failure", files.Failure)
	return nil
}

func (c *Controller) write(p *corev1.Pod, f launch.Files) error {
	if err := WriteFiles(c.cfg.LaunchDir, string(p.UID), f); err != nil {
		return err
	}
	c.markDone(p.UID)
	return nil
}

func (c *Controller) markDone(uid types.UID) {
	c.mu.Lock()
	c.done[uid] = true
	c.mu.Unlock()
}

// initializeApplication tells the node's services of a starting
// container's application and its service data.
func (c *Controller) initializeApplication(ctx context.Context, lc launch.Context, serviceData map[string][]byte) error {
	if c.cfg.Services == nil || len(serviceData) == 0 {
		return nil
	}
	ctr, err := yarnid.ParseContainerID(lc.ContainerID)
	if err != nil {
		return fmt.Errorf("localizer: container %q: %w", lc.ContainerID, err)
	}
	return c.cfg.Services.InitializeApplication(ctx, lc.User, ctr.Attempt.App, serviceData)
}

// cleanLeftovers ends the applications whose folders are on the node but
// which ended while knit-node was down.
func (c *Controller) cleanLeftovers(ctx context.Context) {
	apps, err := c.cfg.Preparer.Applications()
	if err != nil {
		c.log.WarnContext(ctx, "application caches", "err", err)
		return
	}
	c.mu.Lock()
	for _, app := range apps {
		c.apps[app] = true
	}
	c.mu.Unlock()
	for _, app := range apps {
		if !c.running(app) {
			c.ended.Add(app)
		}
	}
}

// running reports whether the RM holds app in a state that is not final.
func (c *Controller) running(app string) bool {
	objs, err := c.appLister.List(labels.SelectorFromSet(labels.Set{launch.LabelApplication: launch.LabelValue(app)}))
	if err == nil {
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok && applicationID(m) == app {
				return !launch.IsFinalState(m.GetLabels()[launch.LabelState])
			}
		}
	}
	// Objects written before they carried the application label.
	obj, err := c.appLister.ByNamespace(c.cfg.ApplicationsNamespace).Get(launch.ApplicationObjectName(app))
	if err != nil {
		return false
	}
	m, ok := obj.(metav1.Object)
	return ok && !launch.IsFinalState(m.GetLabels()[launch.LabelState])
}

func (c *Controller) applicationChanged(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok || !launch.IsFinalState(m.GetLabels()[launch.LabelState]) {
		return
	}
	if app := applicationID(m); app != "" && c.onNode(app) {
		c.ended.Add(app)
	}
}

func (c *Controller) applicationGone(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		if app := applicationID(m); app != "" && c.onNode(app) {
			c.ended.Add(app)
		}
	}
}

// onNode reports whether the application has folders on this node; the
// RM's other applications are none of this node's business. It reads
// memory, not the disk: the RM's informer hands every application it keeps
// to this handler at start.
func (c *Controller) onNode(app string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apps[app]
}

func (c *Controller) processEnded(ctx context.Context) bool {
	app, quit := c.ended.Get()
	if quit {
		return false
	}
	defer c.ended.Done(app)
	if err := c.endApplication(ctx, app); err != nil {
		c.log.WarnContext(ctx, "end application", "app", app, "err", err)
		c.ended.AddRateLimited(app)
		return true
	}
	c.ended.Forget(app)
	return true
}

// endApplication is the NodeManager's application cleanup: the services
// forget the application (the shuffle its job token), its container logs
// are handed to log aggregation, then its folders go, map outputs with
// them.
func (c *Controller) endApplication(ctx context.Context, app string) error {
	id, err := yarnid.ParseApplicationID(app)
	if err != nil {
		return nil // not an application: nothing to retry
	}
	if c.cfg.Services != nil {
		if err := c.cfg.Services.StopApplication(ctx, id); err != nil {
			return err
		}
	}
	if c.cfg.AMRMProxy != nil {
		c.cfg.AMRMProxy.EndApplication(ctx, id)
	}
	if c.cfg.Logs != nil {
		if err := c.cfg.Logs.ApplicationEnded(ctx, app); err != nil {
			return err
		}
	}
	if err := c.cfg.Preparer.CleanApplication(app); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.apps, app)
	c.mu.Unlock()
	c.log.InfoContext(ctx, "application ended on the node", "app", app)
	return nil
}

// applicationID is the id of the application a YarnApplication holds: its
// label, or, on objects written before it, its name read back (the RM names
// application_1_0001 application-1-0001, launch.ApplicationObjectName).
func applicationID(m metav1.Object) string {
	if id, ok := m.GetLabels()[launch.LabelApplication]; ok {
		return id
	}
	id := strings.ReplaceAll(m.GetName(), "-", "_")
	if _, err := yarnid.ParseApplicationID(id); err != nil {
		return ""
	}
	return id
}

// podGone releases a deleted pod's resources and launch folder. The
// application's folders stay until the application ends: a finished map's
// output is served from them after its pod is gone.
func (c *Controller) podGone(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.done, p.UID)
	c.mu.Unlock()
	if id := p.Labels[launch.LabelContainer]; id != "" {
		c.cfg.Preparer.Release(id)
	}
	_ = os.RemoveAll(filepath.Dir(launch.FilesPath(c.cfg.LaunchDir, string(p.UID))))
}
