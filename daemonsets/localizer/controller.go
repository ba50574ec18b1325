package localizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
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

// ControllerConfig holds what the node's localizer controller needs.
type ControllerConfig struct {
	Client   kubernetes.Interface
	NodeName string
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

	mu   sync.Mutex
	done map[types.UID]bool // launch files written
}

// NewController returns the controller; Run starts it.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.LaunchDir == "" || cfg.Preparer == nil {
		return nil, errors.New("localizer: Client, NodeName, LaunchDir and Preparer are required")
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
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !toolscache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("localizer: pod cache: %w", ctx.Err())
	}
	c.cleanLeftovers(ctx)
	var wg sync.WaitGroup
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
	if _, err := os.Stat(path); err == nil {
		c.markDone(p.UID)
		return nil
	}
	lc, err := launch.DecodeContext(value)
	if err != nil {
		// Not ours to retry: the container fails with the reason.
		return c.write(p, launch.Files{ContainerID: p.Labels[launch.LabelContainer], Failure: err.Error()})
	}
	var creds []byte
	if lc.TokensSecret != "" {
		s, err := c.cfg.Client.CoreV1().Secrets(p.Namespace).Get(ctx, lc.TokensSecret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("localizer: credentials of %s: %w", lc.ContainerID, err)
		}
		creds = s.Data[launch.SecretKeyTokens]
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

// cleanLeftovers removes the caches of applications whose pods went while
// knit-node was down.
func (c *Controller) cleanLeftovers(ctx context.Context) {
	apps, err := c.cfg.Preparer.Applications()
	if err != nil {
		c.log.WarnContext(ctx, "application caches", "err", err)
		return
	}
	for _, app := range apps {
		left, err := c.pods.List(labels.SelectorFromSet(labels.Set{launch.LabelApplication: app}))
		if err == nil && len(left) == 0 {
			if err := c.cfg.Preparer.CleanApplication(app); err != nil {
				c.log.WarnContext(ctx, "clean application cache", "app", app, "err", err)
			}
		}
	}
}

// podGone releases a deleted pod's resources and launch folder, and the
// application's cache once its last pod on this node is gone.
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
	app := p.Annotations[launch.LabelApplication]
	if app == "" {
		app = p.Labels[launch.LabelApplication]
	}
	if _, err := yarnid.ParseApplicationID(app); err != nil {
		return
	}
	left, err := c.pods.List(labels.SelectorFromSet(labels.Set{launch.LabelApplication: p.Labels[launch.LabelApplication]}))
	if err == nil && len(left) == 0 {
		if err := c.cfg.Preparer.CleanApplication(app); err != nil {
			c.log.Warn("clean application cache", "app", app, "err", err)
		}
	}
}
