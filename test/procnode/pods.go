package procnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// exitPollInterval is how often running shims are checked for an exit. A
// process node runs tens of containers, and a stat per container per tick
// is cheaper than a goroutine and a pidfd each.
const exitPollInterval = 100 * time.Millisecond

// maxActionRounds bounds the observe → plan → act rounds of one sync (an
// init container that exits at once lets the next start in the same sync).
const maxActionRounds = 8

// watchedRun is a running run the exit poller checks.
type watchedRun struct {
	key   string // namespace/name of its pod
	state shimState
	spec  string
	exit  string
}

// postedPair remembers the last status written for a pod and what the API
// server returned, so a field the server drops or normalizes does not make
// every sync write again.
type postedPair struct {
	want, stored corev1.PodStatus
}

// configError is a container that cannot be configured (a missing Secret,
// a bad subPath): reported as CreateContainerConfigError and retried.
type configError struct{ err error }

var _ error = configError{}

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// Run registers the node and serves its pods until ctx ends. It leaves
// running pod processes alone when it returns, so a new Node on the same
// Dir adopts them. It returns nil when ctx ends and an error only if the
// node could not be registered for good (invalid, forbidden).
func (n *Node) Run(ctx context.Context) error {
	if !n.started.CompareAndSwap(false, true) {
		return fmt.Errorf("procnode %s: Run may be called once", n.cfg.Name)
	}
	// Failed syncs (a Secret not there yet, an API error) retry from 5ms
	// up to every 10s, about as often as a kubelet retries a pod, rather
	// than the controller default of up to 1000s.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 10*time.Second)
	n.queue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "procnode-" + n.cfg.Name})
	defer n.queue.ShutDown()
	var kubeletListener net.Listener
	if n.cfg.KubeletTLS != nil {
		// Bound before the Node is registered: its status publishes the port.
		l, port, err := listenKubeletAPI(n.cfg.Address, n.cfg.KubeletPort)
		if err != nil {
			return fmt.Errorf("procnode %s: %w", n.cfg.Name, err)
		}
		defer l.Close()
		kubeletListener, n.cfg.KubeletPort = l, port
	}
	if err := n.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("procnode %s: register: %w", n.cfg.Name, err)
	}
	n.log.Info("node registered", "address", n.cfg.Address, "dir", n.cfg.Dir)

	factory := informers.NewSharedInformerFactoryWithOptions(n.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.cfg.Name).String()
		}))
	podInformer := factory.Core().V1().Pods()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: n.enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Pod)
			p, ok2 := newObj.(*corev1.Pod)
			// A resync hands the cached object back as both. A resource
			// version alone is no proof: the fake clientset of unit tests
			// keeps it across updates, and a deletion must never be missed.
			if ok1 && ok2 && (o == p || (p.ResourceVersion != "" && o.ResourceVersion == p.ResourceVersion &&
				o.DeletionTimestamp.Equal(p.DeletionTimestamp))) {
				return // a resync: nothing changed
			}
			if ok1 && ok2 && !podTerminal(o) && podTerminal(p) {
				n.freeRoom() // what it held is free for deferred resizes
			}
			n.enqueue(newObj)
		},
		DeleteFunc: func(obj any) {
			n.freeRoom()
			n.enqueue(obj)
		},
	}); err != nil {
		return fmt.Errorf("procnode %s: watch pods: %w", n.cfg.Name, err)
	}
	n.pods = podInformer.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return nil // ctx ended
	}
	// Pods on disk that the API no longer has get a sync too, so they are
	// stopped and removed; the others are adopted by their normal sync.
	n.enqueueOnDisk()

	var wg sync.WaitGroup
	if kubeletListener != nil {
		api := &kubeletAPI{node: n.cfg.Name, client: n.cfg.Client, pods: n.pods, rt: n.rt, dir: n.cfg.Dir,
			addr: n.cfg.Address, log: n.log.With("server", "kubelet")}
		wg.Go(func() {
			if err := api.serve(ctx, kubeletListener, *n.cfg.KubeletTLS); err != nil {
				n.log.Error("kubelet API stopped", "err", err)
			}
		})
		n.log.Info("serving the kubelet API", "address", kubeletListener.Addr().String())
	}
	wg.Go(func() { n.leaseLoop(ctx) })
	wg.Go(func() { n.statusLoop(ctx) })
	wg.Go(func() { n.watchExits(ctx) })
	for range n.cfg.Workers {
		wg.Go(func() {
			for n.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	n.queue.ShutDown()
	wg.Wait()
	n.bg.Wait()
	return nil
}

func (n *Node) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		n.log.Warn("cannot key pod", "err", err)
		return
	}
	n.queue.Add(key)
}

func (n *Node) enqueueOnDisk() {
	entries, err := os.ReadDir(filepath.Join(n.cfg.Dir, podsFolder))
	if err != nil {
		n.log.Warn("cannot list pod folders", "err", err)
		return
	}
	for _, e := range entries {
		if ns, name, _, ok := parsePodFolder(e.Name()); ok {
			n.queue.Add(ns + "/" + name)
		}
	}
}

// processNext syncs one pod key; the retry policy lives here: an error
// requeues the key with rate limiting, success forgets its failures.
func (n *Node) processNext(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	if err := n.syncPod(ctx, key); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("pod sync failed", "pod", key, "err", err)
			n.queue.AddRateLimited(key)
		}
		return true
	}
	n.queue.Forget(key)
	return true
}

// watchExits enqueues the pod of every watched run whose shim recorded an
// exit or vanished.
func (n *Node) watchExits(ctx context.Context) {
	t := time.NewTicker(exitPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.mu.Lock()
		runs := make(map[string]watchedRun, len(n.watched))
		for k, w := range n.watched {
			runs[k] = w
		}
		n.mu.Unlock()
		for k, w := range runs {
			if _, err := os.Stat(w.exit); err != nil && shimAlive(&w.state, w.spec) {
				continue
			}
			n.mu.Lock()
			delete(n.watched, k)
			n.mu.Unlock()
			n.queue.Add(w.key)
		}
	}
}

func (n *Node) watch(key string, a *attempt) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.watched[a.Paths.Spec]; !ok {
		n.watched[a.Paths.Spec] = watchedRun{key: key, state: *a.State, spec: a.Paths.Spec, exit: a.Paths.Exit}
	}
}

// syncPod brings one pod's processes and status in line with its spec. It
// is idempotent: everything it decides on comes from the lister and the
// files in Dir.
func (n *Node) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		n.log.Warn("bad pod key", "key", key, "err", err)
		return nil // cannot get better by retrying
	}
	pod, err := n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		n.forgetDeferred(key)
		return n.cleanupPods(ctx, key, ns, name, "")
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	// A pod recreated under the same name leaves the old one's folder.
	if err := n.cleanupPods(ctx, key, ns, name, pod.UID); err != nil {
		return err
	}
	if pod.Spec.NodeName != n.cfg.Name {
		return nil
	}
	paths := newPodPaths(n.cfg.Dir, pod.Namespace, pod.Name, pod.UID)
	if pod.DeletionTimestamp != nil {
		n.forgetDeferred(key)
		return n.syncTerminating(ctx, key, pod, paths)
	}
	if podTerminal(pod) {
		n.forgetDeferred(key)
		// A terminal pod never runs again; stop what might (nothing should).
		obs, err := n.observe(key, pod, paths)
		if err != nil {
			return err
		}
		n.stopRunning(ctx, key, pod, paths, obs, gracePeriod(pod), killPodCompleted)
		return nil
	}

	objs := newObjectSource(n.cfg.Client, pod.Namespace)
	ready, setupErr := n.ensurePodDir(ctx, pod, paths, objs)
	var (
		waiting  map[string]waitingReason
		requeue  time.Duration
		startErr []error
		more     bool // rounds ran out with work left: sync again
		rz       resizeResult
	)
	if setupErr == nil {
		for round := range maxActionRounds {
			obs, err := n.observe(key, pod, paths)
			if err != nil {
				return err
			}
			if round == 0 {
				// A resize is decided before anything starts, so a
				// container (re)started now gets the allocation in force.
				if rz, err = n.syncResize(key, pod, paths, obs); err != nil {
					return err
				}
			}
			plan := planPod(pod, obs, time.Now(), n.backoff)
			waiting, requeue = plan.Waiting, plan.RequeueAfter
			for _, k := range plan.Kill {
				n.killAsync(ctx, key, paths, k.Container, obs[k.Container].Latest.Restart, gracePeriod(pod), k.Reason)
			}
			if len(plan.Start) > 0 && rz.Allocated == nil {
				if rz.Allocated, err = n.allocateAtStart(pod, paths); err != nil {
					return err
				}
			}
			// Containers run with what they were allocated, which differs
			// from the spec while a resize is pending.
			runPod, _ := rz.Allocated.applyTo(pod)
			startErr = nil
			for _, s := range plan.Start {
				if c := findContainer(runPod, s.Container.Name); c != nil {
					s.Container = c
				}
				if err := n.startContainer(ctx, runPod, paths, objs, s); err != nil {
					var ce configError
					if !errors.As(err, &ce) {
						return err
					}
					waiting[s.Container.Name] = waitingReason{Reason: reasonCreateContainerConfigError, Message: ce.Error()}
					startErr = append(startErr, fmt.Errorf("container %s: %w", s.Container.Name, err))
				}
			}
			if len(plan.Start) == 0 || len(startErr) > 0 {
				break
			}
			more = round == maxActionRounds-1
		}
	}
	obs, err := n.observe(key, pod, paths)
	if err != nil {
		return err
	}
	err = n.postStatus(ctx, pod, func(p *corev1.Pod) corev1.PodStatus {
		return computePodStatus(statusInput{Pod: p, Obs: obs, Waiting: waiting, SandboxReady: ready,
			Allocated: rz.Allocated, ResizePending: rz.Pending, Address: n.cfg.Address, Now: time.Now()})
	})
	switch {
	case more:
		n.queue.Add(key)
	case requeue > 0:
		n.queue.AddAfter(key, requeue)
	}
	return errors.Join(setupErr, errors.Join(startErr...), err)
}

// syncTerminating handles a pod with a deletionTimestamp, as the kubelet
// does: stop every container (SIGTERM, the pod's grace period, SIGKILL),
// then report the final status and delete the pod for good (grace 0, UID
// precondition). The folder goes when the pod has left the API.
func (n *Node) syncTerminating(ctx context.Context, key string, pod *corev1.Pod, paths podPaths) error {
	obs, err := n.observe(key, pod, paths)
	if err != nil {
		return err
	}
	if n.stopRunning(ctx, key, pod, paths, obs, gracePeriod(pod), killPodDeleted) {
		return nil // the kill goroutines enqueue the pod when done
	}
	meta, _ := readPodMeta(paths)
	alloc, _, _ := readAllocation(paths) // without one, the spec is reported
	err = n.postStatus(ctx, pod, func(p *corev1.Pod) corev1.PodStatus {
		return computePodStatus(statusInput{Pod: p, Obs: obs, SandboxReady: meta.VolumesReady, Terminal: true,
			Allocated: alloc, Address: n.cfg.Address, Now: time.Now()})
	})
	if err != nil {
		return err
	}
	uid := pod.UID
	err = n.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	n.log.Info("pod terminated", "pod", key, "uid", pod.UID)
	return nil
}

// stopRunning starts stopping every running container of the pod and
// reports whether any was running.
func (n *Node) stopRunning(ctx context.Context, key string, pod *corev1.Pod, paths podPaths, obs map[string]containerObs, grace time.Duration, reason string) bool {
	any := false
	for name, o := range obs {
		if o.Latest != nil && o.Latest.Running {
			any = true
			n.killAsync(ctx, key, paths, name, o.Latest.Restart, grace, reason)
		}
	}
	return any
}

func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// gracePeriod is how long a container gets between SIGTERM and SIGKILL:
// the deletion's grace period, else the pod's, never under the kubelet's
// 2s floor.
func gracePeriod(pod *corev1.Pod) time.Duration {
	secs := int64(corev1.DefaultTerminationGracePeriodSeconds)
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		secs = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		secs = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(time.Duration(secs)*time.Second, minGracePeriod)
}

// killAsync stops one run in the background (once, however often it is
// asked) and enqueues the pod when it is over. The reason is recorded
// first, so it survives a node restart.
func (n *Node) killAsync(ctx context.Context, key string, paths podPaths, container string, restart int, grace time.Duration, reason string) {
	n.killAt(ctx, key, paths.attempt(container, restart), grace, reason)
}

func (n *Node) killAt(ctx context.Context, key string, ap attemptPaths, grace time.Duration, reason string) {
	n.mu.Lock()
	if n.killing[ap.Spec] {
		n.mu.Unlock()
		return
	}
	n.killing[ap.Spec] = true
	n.mu.Unlock()
	n.bg.Go(func() {
		defer func() {
			n.mu.Lock()
			delete(n.killing, ap.Spec)
			n.mu.Unlock()
			n.queue.Add(key)
		}()
		a, err := n.rt.load(ap)
		if err == nil && a.Kill == nil {
			err = writeJSONAtomic(ap.Kill, killRecord{Reason: reason, At: time.Now()})
		}
		if err == nil {
			n.log.Info("stopping container", "pod", key, "container", a.Spec.Container, "restart", a.Spec.Restart, "reason", reason, "grace", grace)
			err = n.rt.stop(ctx, a, grace)
		}
		if err != nil && ctx.Err() == nil {
			n.log.Warn("stopping container failed", "pod", key, "run", ap.Spec, "err", err)
		}
	})
}

// cleanupPods stops and removes the folders of pod ns/name other than
// keep's (all of them when keep is empty): pods that left the API while
// their processes might still run.
func (n *Node) cleanupPods(ctx context.Context, key, ns, name string, keep types.UID) error {
	root := filepath.Join(n.cfg.Dir, podsFolder)
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("list pod folders: %w", err)
	}
	for _, e := range entries {
		fns, fname, uid, ok := parsePodFolder(e.Name())
		if !ok || fns != ns || fname != name || uid == keep {
			continue
		}
		podRoot := filepath.Join(root, e.Name())
		runs, err := n.runsIn(podRoot)
		if err != nil {
			return fmt.Errorf("pod folder %s: %w", e.Name(), err)
		}
		for _, a := range runs {
			n.killAt(ctx, key, a.Paths, minGracePeriod, killPodGone)
		}
		if len(runs) > 0 {
			continue // removed on the sync that follows the kills
		}
		n.mu.Lock()
		killing := false
		for spec := range n.killing {
			if strings.HasPrefix(spec, podRoot+string(filepath.Separator)) {
				killing = true
			}
		}
		delete(n.posted, uid)
		n.mu.Unlock()
		if killing {
			continue
		}
		if err := os.RemoveAll(podRoot); err != nil {
			return fmt.Errorf("remove pod folder: %w", err)
		}
		n.log.Info("pod folder removed", "pod", key, "uid", uid)
	}
	return nil
}

func readPodMeta(paths podPaths) (podMeta, error) {
	var m podMeta
	_, err := readJSON(paths.meta(), &m)
	return m, err
}

// ensurePodDir creates the pod's folder and its volumes once; it reports
// whether they are in place (the pod's "sandbox" is ready).
func (n *Node) ensurePodDir(ctx context.Context, pod *corev1.Pod, paths podPaths, objs *objectSource) (bool, error) {
	meta, err := readPodMeta(paths)
	if err != nil {
		return false, err
	}
	if meta.VolumesReady {
		return true, nil
	}
	if err := os.MkdirAll(paths.root, 0o755); err != nil {
		return false, fmt.Errorf("create pod folder: %w", err)
	}
	meta = podMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	if err := writeJSONAtomic(paths.meta(), meta); err != nil {
		return false, err
	}
	if err := setupVolumes(ctx, volumeContext{Pod: pod, Paths: paths, Address: n.cfg.Address,
		Allocatable: n.cfg.Capacity, Objects: objs}); err != nil {
		return false, fmt.Errorf("set up volumes: %w", err)
	}
	meta.VolumesReady = true
	if err := writeJSONAtomic(paths.meta(), meta); err != nil {
		return false, err
	}
	return true, nil
}

// observe reads every container's latest two runs, settling runs whose
// shim is gone and watching those that run.
func (n *Node) observe(key string, pod *corev1.Pod, paths podPaths) (map[string]containerObs, error) {
	obs := map[string]containerObs{}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range all {
		c := &all[i]
		nums, err := attemptNumbers(paths.state(c.Name))
		if err != nil {
			return nil, err
		}
		if len(nums) == 0 {
			continue
		}
		var o containerObs
		for j, num := range nums[max(0, len(nums)-2):] {
			a, err := n.rt.load(paths.attempt(c.Name, num))
			if err != nil {
				return nil, err
			}
			running, err := n.rt.settle(a)
			if err != nil {
				return nil, err
			}
			if running {
				n.watch(key, a)
			}
			ao := attemptObservation(a, running, c)
			if j == 0 && len(nums) >= 2 {
				o.Previous = ao
			} else {
				o.Latest = ao
			}
		}
		obs[c.Name] = o
	}
	return obs, nil
}

// attemptObservation turns a run's files into what planning and status
// need, reading its termination message if it ended.
func attemptObservation(a *attempt, running bool, c *corev1.Container) *attemptObs {
	o := &attemptObs{
		Restart:     a.Spec.Restart,
		ContainerID: a.Spec.ContainerID,
		Image:       a.Spec.Image,
		BackoffStep: a.Spec.BackoffStep,
		Running:     running,
	}
	if a.State != nil {
		o.StartedAt = a.State.StartedAt
	}
	if a.Kill != nil {
		o.KillReason = a.Kill.Reason
	}
	if !running && a.Exit != nil {
		o.Exit = a.Exit
		data, err := readFileTail(a.Paths.TermLog, maxTerminationMessageBytes)
		o.Message = terminationMessage(data, err, c.TerminationMessagePolicy, a.Exit, func() ([]byte, error) {
			return readLogOutput(a.Paths.Log, logTailBytes)
		})
	}
	return o
}

// startContainer resolves the container's environment, volumes and paths,
// and starts its run. A configError means the spec cannot be run as it
// stands (CreateContainerConfigError); other errors are the node's.
func (n *Node) startContainer(ctx context.Context, pod *corev1.Pod, paths podPaths, objs *objectSource, s startAction) error {
	c := s.Container
	env, err := containerEnv(ctx, envContext{Pod: pod, Address: n.cfg.Address, Allocatable: n.cfg.Capacity,
		ServiceEnv: serviceEnv(n.cfg.APIServerHost, n.cfg.APIServerPort), Objects: objs}, c)
	if err != nil {
		return configError{err}
	}
	ap := paths.attempt(c.Name, s.Restart)
	maps, err := mountMappings(pod, c, paths, env, ap.TermLog)
	if err != nil {
		return configError{err}
	}
	tr := newPathTranslator(maps)
	command, args := expandCommand(c, env)
	argv := tr.translateAll(append(command, args...))

	dir := paths.work(c.Name)
	if c.WorkingDir != "" {
		dir = tr.translate(c.WorkingDir)
	}
	// The runtime creates a missing working directory; if that is not
	// possible the shim reports the chdir failure as a StartError.
	_ = os.MkdirAll(dir, 0o755)
	if err := os.MkdirAll(filepath.Dir(ap.TermLog), 0o755); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	if err := os.WriteFile(ap.TermLog, nil, 0o666); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	var procEnv envList
	for _, kv := range n.cfg.BaseEnv {
		k, v, _ := strings.Cut(kv, "=")
		procEnv.Set(k, v)
	}
	for _, v := range env.vars {
		procEnv.Set(v.Name, tr.translate(v.Value))
	}
	envv := make([]string, 0, len(procEnv.vars))
	for _, v := range procEnv.vars {
		envv = append(envv, v.Name+"="+v.Value)
	}
	spec := shimSpec{
		Argv: argv, Env: envv, Dir: dir, Mounts: maps,
		Pod: pod.Namespace + "/" + pod.Name, Container: c.Name, Restart: s.Restart,
		ContainerID: containerID(pod.UID, c.Name, s.Restart), Image: c.Image, BackoffStep: s.Step,
		CreatedAt: time.Now(),
	}
	if err := n.rt.start(ctx, ap, spec); err != nil {
		return err
	}
	n.log.Info("container started", "pod", spec.Pod, "container", c.Name, "restart", s.Restart)
	return nil
}

// containerID names a run: stable, unique per pod, container and restart,
// and shaped like a container runtime's 64 hex digits.
func containerID(uid types.UID, container string, restart int) string {
	sum := sha256.Sum256([]byte(string(uid) + "/" + container + "/" + strconv.Itoa(restart)))
	return hex.EncodeToString(sum[:])
}

// postStatus writes the status build computes for the pod, unless the API
// already has it; on a conflict it reads the pod again and rebuilds.
func (n *Node) postStatus(ctx context.Context, pod *corev1.Pod, build func(*corev1.Pod) corev1.PodStatus) error {
	pods := n.cfg.Client.CoreV1().Pods(pod.Namespace)
	cur := pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != pod.UID {
				return nil // replaced by a new pod of the same name
			}
			cur = fresh
		}
		want := build(cur)
		if n.statusUpToDate(cur, want) {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Status = want
		out, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: fieldManager})
		if err != nil {
			cur = nil
			return err
		}
		n.mu.Lock()
		n.posted[pod.UID] = postedPair{want: want, stored: out.Status}
		n.mu.Unlock()
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (n *Node) statusUpToDate(cur *corev1.Pod, want corev1.PodStatus) bool {
	if apiequality.Semantic.DeepEqual(cur.Status, want) {
		return true
	}
	n.mu.Lock()
	p, ok := n.posted[cur.UID]
	n.mu.Unlock()
	return ok && apiequality.Semantic.DeepEqual(p.want, want) && apiequality.Semantic.DeepEqual(p.stored, cur.Status)
}
