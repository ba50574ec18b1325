package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rm/store"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/supervise"
	"github.com/knitdev/knit/test/tcpproxy"
)

// The reliability proofs of RM high availability (issue 20), each on a
// local cluster of its own with two knit-rm replicas. Besides what each
// test does to the RMs, every one records, from the API server, the RM
// store's writes (checkEpochOrder: two leaders never wrote at once) and
// every Knit pod (checkContainerStarts: no container lost or started
// twice).

// reliabilityCluster is a local cluster with its control plane and nodes
// but no knit-rm yet: the test starts its recorders first, then the RMs
// (startHARMs), so that they see every write from the first leader on.
// knit-rm restarts after a short back-off: a replica killed or deposed
// again and again is back within a second, not the kubelet's 10 s to 5 min.
func reliabilityCluster(t *testing.T, nodes int) *localcluster.Cluster {
	t.Helper()
	return haCluster(t, "ha-reliability", localcluster.Options{Nodes: nodes,
		RMRestarts: supervise.Backoff{Initial: 200 * time.Millisecond, Max: time.Second, Reset: 5 * time.Second}})
}

// startHARMs starts the two knit-rm replicas, talking to the API server
// with the kubeconfigs of ids (none: the cluster's own).
func startHARMs(t *testing.T, c *localcluster.Cluster, ids localcluster.Identities) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := c.StartRMAs(ctx, ids, []string{filepath.Join(binDir, "knit-rm")}); err != nil {
		t.Fatal(err)
	}
}

// recorder keeps every object a List returns and every event of the watch
// that follows it, reconnecting as needed (a RetryWatcher), until stop.
type recorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	events []watch.Event
}

// record lists with lw, then watches from the list's resourceVersion on.
func record(t *testing.T, lw *cache.ListWatch) *recorder {
	t.Helper()
	list, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{done: make(chan struct{})}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range items {
		r.events = append(r.events, watch.Event{Type: watch.Added, Object: o})
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	w, err := watchtools.NewRetryWatcherWithContext(ctx, lm.GetResourceVersion(), lw)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				r.mu.Lock()
				r.events = append(r.events, ev)
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop ends the watch, waits for it and returns what it recorded.
func (r *recorder) stop() []watch.Event {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// snapshot returns what has been recorded so far.
func (r *recorder) snapshot() []watch.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// storeRecorders watch what the RMs write to their store: every
// YarnApplication, and the cluster ConfigMap whose epoch each new leader
// raises before it writes anything else. Neither goes through the RMs'
// (maybe cut off) API server connection.
func storeRecorders(t *testing.T, c *localcluster.Cluster) (apps, cluster *recorder) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.ControlPlane.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(store.GVR()).Namespace(localcluster.RMNamespace)
	apps = record(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	})
	cms := c.Client.CoreV1().ConfigMaps(localcluster.RMNamespace)
	only := fields.OneTermEqualSelector("metadata.name", store.ClusterConfigMap).String()
	cluster = record(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = only
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = only
			return cms.Watch(ctx, o)
		},
	})
	return apps, cluster
}

// podRecorder watches every pod of a YARN application, in any namespace.
func podRecorder(t *testing.T, c *localcluster.Cluster) *recorder {
	t.Helper()
	pods := c.Client.CoreV1().Pods("")
	return record(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = launch.LabelApplication
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = launch.LabelApplication
			return pods.Watch(ctx, o)
		},
	})
}

// storeWrite is one write of the RM store as the API server ordered it.
type storeWrite struct {
	rv     uint64 // etcd's revision: one order over every object of the cluster
	object string
	epoch  int64
	raise  bool // the cluster ConfigMap's epoch went up to epoch
}

// storeWrites merges the recorders' events into the API server's order.
// Deletions are left out: they carry the last writer's epoch, not the
// deleter's.
func storeWrites(apps, cluster []watch.Event) ([]storeWrite, error) {
	var out []storeWrite
	raised := int64(0)
	for _, ev := range cluster {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("configmap resourceVersion %q: %w", cm.ResourceVersion, err)
		}
		e, err := strconv.ParseInt(cm.Data[store.KeyEpoch], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("configmap epoch %q: %w", cm.Data[store.KeyEpoch], err)
		}
		if e != raised {
			out = append(out, storeWrite{rv: rv, object: store.ClusterConfigMap, epoch: e, raise: true})
			raised = e
		}
	}
	for _, ev := range apps {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			continue
		}
		o, ok := ev.Object.(metav1.Object)
		if !ok {
			continue
		}
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s resourceVersion %q: %w", o.GetName(), o.GetResourceVersion(), err)
		}
		raw, ok := o.GetAnnotations()[store.AnnotationEpoch]
		if !ok {
			return nil, fmt.Errorf("%s written at revision %d without an RM epoch", o.GetName(), rv)
		}
		e, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: epoch %q: %w", o.GetName(), raw, err)
		}
		out = append(out, storeWrite{rv: rv, object: o.GetName(), epoch: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rv < out[j].rv })
	return out, nil
}

// checkEpochOrder says whether the store's writes show one leader at a
// time: once a new leader has raised the epoch, nothing of an older epoch
// is written (the deposed leader's fence and the store's epoch check), and
// no epoch writes before it was raised. It returns how many writes each
// epoch made.
func checkEpochOrder(writes []storeWrite) (map[int64]int, error) {
	perEpoch := map[int64]int{}
	raised := int64(0)
	for _, w := range writes {
		switch {
		case w.raise:
			if w.epoch <= raised {
				return nil, fmt.Errorf("revision %d: epoch went from %d to %d", w.rv, raised, w.epoch)
			}
			raised = w.epoch
		case w.epoch < raised:
			return nil, fmt.Errorf("revision %d: %s written by RM epoch %d after epoch %d was raised: two leaders wrote", w.rv, w.object, w.epoch, raised)
		case w.epoch > raised:
			return nil, fmt.Errorf("revision %d: %s written by RM epoch %d, which was never raised (last %d)", w.rv, w.object, w.epoch, raised)
		default:
			perEpoch[w.epoch]++
		}
	}
	return perEpoch, nil
}

// requireOneLeaderAtATime fails t unless the recorded store writes pass
// checkEpochOrder, and unless the epochs count up to at least want.
func requireOneLeaderAtATime(t *testing.T, apps, cluster *recorder, want int64) {
	t.Helper()
	writes, err := storeWrites(apps.stop(), cluster.stop())
	if err != nil {
		t.Fatal(err)
	}
	perEpoch, err := checkEpochOrder(writes)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for e := range perEpoch {
		last = max(last, e)
	}
	t.Logf("store: %d writes in revision order, by epoch %v", len(writes), perEpoch)
	if last < want {
		t.Errorf("the last epoch to write is %d, want at least %d (one per leader)", last, want)
	}
}

// containerRun is what the pods of one container id showed.
type containerRun struct {
	role     string
	pods     map[string]bool // pod UIDs bound to the container id
	launches map[string]bool // the launch contexts its pods were given
	restarts int32
	ended    bool // some pod of it ended Succeeded
	lostPod  string
	last     *corev1.Pod
}

// String says how the container's last pod ended, for a failure.
func (r *containerRun) String() string {
	p := r.last
	var states []string
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			states = append(states, fmt.Sprintf("%s exited %d (%s: %s)", s.Name, t.ExitCode, t.Reason, t.Message))
		}
	}
	return fmt.Sprintf("pod %s phase %s deleted %v stopped-by %q %v", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, p.Annotations[launch.AnnotationStoppedBy], states)
}

// containerRuns reads the pod events: for each container id, the pods it
// had, the launches they got (RKS writes the launch context on the pod
// when an AM, or the RM for an AM, starts the container), whether they
// restarted, ended, or went while still running.
func containerRuns(events []watch.Event) map[string]*containerRun {
	runs := map[string]*containerRun{}
	for _, ev := range events {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		id := p.Labels[launch.LabelContainer]
		if id == "" {
			continue // a pending ask, no container yet
		}
		r := runs[id]
		if r == nil {
			r = &containerRun{role: p.Labels[launch.LabelRole], pods: map[string]bool{}, launches: map[string]bool{}}
			runs[id] = r
		}
		r.pods[string(p.UID)] = true
		r.last = p
		if lc, ok := p.Annotations[launch.AnnotationContext]; ok {
			r.launches[lc] = true
		}
		for _, s := range p.Status.ContainerStatuses {
			r.restarts = max(r.restarts, s.RestartCount)
		}
		if p.Status.Phase == corev1.PodSucceeded {
			r.ended = true
		}
		if ev.Type == watch.Deleted && p.Status.Phase == corev1.PodRunning && !r.ended {
			r.lostPod = p.Name
		}
	}
	return runs
}

// checkContainerStarts fails t unless every container id of the apps had
// exactly one pod and, once launched, was launched once, never restarted,
// and (a task of a job that succeeded) ended Succeeded rather than going
// while running. A container allocated but never launched is no loss: an
// allocation whose answer a failover lost is released, and the AM,
// resyncing, asks again, as with YARN's work-preserving restart. It
// returns how many containers were launched, and how many were not.
func checkContainerStarts(t *testing.T, events []watch.Event, apps map[string]bool) (launched, unlaunched int) {
	t.Helper()
	for id, r := range containerRuns(events) {
		cid, err := yarnid.ParseContainerID(id)
		if err != nil {
			t.Errorf("pod label %s=%q: %v", launch.LabelContainer, id, err)
			continue
		}
		if !apps[cid.Attempt.App.String()] {
			continue
		}
		if len(r.launches) == 0 {
			unlaunched++
		} else {
			launched++
		}
		switch {
		case len(r.pods) != 1:
			t.Errorf("container %s had %d pods", id, len(r.pods))
		case len(r.launches) > 1:
			t.Errorf("container %s was launched %d times", id, len(r.launches))
		case r.restarts != 0:
			t.Errorf("container %s restarted %d times: %v", id, r.restarts, r)
		case len(r.launches) == 0:
		case r.lostPod != "":
			t.Errorf("container %s: pod %s went while running: %v", id, r.lostPod, r)
		case r.role == launch.RoleTask && !r.ended:
			t.Errorf("task container %s never ended Succeeded: %v", id, r)
		}
	}
	return launched, unlaunched
}

// submitter submits unmanaged applications one after another through a
// failover client of every RM, as a Hadoop client with the HA
// yarn-site.xml does, until stopped. An application whose
// submitApplication was answered is accepted: the RM answers once it is
// stored.
type submitter struct {
	rpc    *yarnrpc.ApplicationClientProtocolClient
	conn   client.Caller
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	accepted []*yarnpb.ApplicationIdProto
	errs     []error
}

func startSubmitter(t *testing.T, c *localcluster.Cluster, every time.Duration) *submitter {
	t.Helper()
	var addrs []string
	for _, rm := range c.RMs {
		addrs = append(addrs, rm.Client)
	}
	conn, err := client.NewCaller(strings.Join(addrs, ","), ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "dsuser", Errors: yarnerr.FromRemote, Logger: clusterLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &submitter{rpc: yarnrpc.NewApplicationClientProtocolClient(conn), conn: conn, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if err := s.submitOne(ctx); err != nil && ctx.Err() == nil {
				s.mu.Lock()
				s.errs = append(s.errs, err)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.stop(); conn.Close() })
	return s
}

func (s *submitter) submitOne(ctx context.Context) error {
	newApp, err := s.rpc.GetNewApplication(ctx, &yarnpb.GetNewApplicationRequestProto{})
	if err != nil {
		return fmt.Errorf("getNewApplication: %w", err)
	}
	_, err = s.rpc.SubmitApplication(ctx, &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: newApp.ApplicationId, ApplicationName: proto.String("ha-stream"), Queue: proto.String("default"),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)},
	}})
	if err != nil {
		return fmt.Errorf("submitApplication %s: %w", appIDString(newApp.ApplicationId), err)
	}
	s.mu.Lock()
	s.accepted = append(s.accepted, newApp.ApplicationId)
	s.mu.Unlock()
	return nil
}

func (s *submitter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.accepted)
}

// stop ends the stream and waits for the submission in flight.
func (s *submitter) stop() {
	s.cancel()
	<-s.done
}

// requireEveryAcceptedSubmissionEnds fails t unless the active RM knows
// every application the submitter was told it accepted, and each reaches a
// final state once killed.
func (s *submitter) requireEveryAcceptedSubmissionEnds(t *testing.T) {
	t.Helper()
	s.stop()
	s.mu.Lock()
	accepted, errs := slices.Clone(s.accepted), slices.Clone(s.errs)
	s.mu.Unlock()
	for _, err := range errs {
		t.Errorf("a submission failed instead of failing over: %v", err)
	}
	if len(accepted) == 0 {
		t.Fatal("no submission accepted")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, id := range accepted {
		resp, err := s.rpc.GetApplicationReport(ctx, &yarnpb.GetApplicationReportRequestProto{ApplicationId: id})
		if err != nil {
			t.Errorf("accepted %s: %v", appIDString(id), err)
			continue
		}
		if final(resp.GetApplicationReport().GetYarnApplicationState()) {
			continue
		}
		if _, err := s.rpc.ForceKillApplication(ctx, &yarnpb.KillApplicationRequestProto{ApplicationId: id}); err != nil {
			t.Errorf("kill %s: %v", appIDString(id), err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	states := map[string]int{}
	eventually.WithinEvery(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
		clear(states)
		for _, id := range accepted {
			resp, err := s.rpc.GetApplicationReport(ctx, &yarnpb.GetApplicationReportRequestProto{ApplicationId: id})
			if err != nil {
				return fmt.Errorf("%s: %w", appIDString(id), err)
			}
			st := resp.GetApplicationReport().GetYarnApplicationState()
			if !final(st) {
				return fmt.Errorf("%s still %s", appIDString(id), st)
			}
			states[st.String()]++
		}
		return nil
	})
	t.Logf("%d accepted submissions, every one known and ended: %v", len(accepted), states)
}

func final(st yarnpb.YarnApplicationStateProto) bool {
	switch st {
	case yarnpb.YarnApplicationStateProto_FINISHED, yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED:
		return true
	}
	return false
}

func appIDString(id *yarnpb.ApplicationIdProto) string {
	if a, err := yarnid.ApplicationIDFromProto(id); err == nil {
		return a.String()
	}
	return fmt.Sprint(id)
}

// shellJobs runs distshell jobs through the HA configuration, lanes of
// them one after another, until stopped; each must succeed.
type shellJobs struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	apps    map[string]bool
	results []string // a failed job's output
	ran     int
}

var submittedApp = regexp.MustCompile(`Submitted application (application_\d+_\d+)`)

func startShellJobs(c *localcluster.Cluster, lanes int, args ...string) *shellJobs {
	ctx, cancel := context.WithCancel(context.Background())
	j := &shellJobs{cancel: cancel, apps: map[string]bool{}}
	conf := localcluster.HadoopConfDir(c.ControlPlane.Dir)
	for range lanes {
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			for ctx.Err() == nil {
				// A job once started runs to its end whatever stop says.
				out, err := runShellJob(conf, args...)
				j.mu.Lock()
				j.ran++
				if m := submittedApp.FindStringSubmatch(out); m != nil {
					j.apps[m[1]] = true
				}
				if err != nil || !strings.Contains(out, "SUCCEEDED") {
					j.results = append(j.results, fmt.Sprintf("%v\n%s", err, tail(out, 30)))
				}
				j.mu.Unlock()
			}
		}()
	}
	return j
}

// runShellJob runs one distshell job with the client configuration in
// conf and returns its output.
func runShellJob(conf string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), args...)
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+conf, "USER=dsuser")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// startLoad starts a submitter of an application every interval and one
// distshell job of two containers sleeping seconds, and returns once the
// job's containers run and three submissions were accepted; the lane then
// starts no job after this one.
func startLoad(t *testing.T, c *localcluster.Cluster, pods *recorder, every time.Duration, seconds string) (*submitter, *shellJobs) {
	t.Helper()
	subs := startSubmitter(t, c, every)
	jobs := startShellJobs(c, 1, "-shell_command", "sleep", "-shell_args", seconds,
		"-num_containers", "2", "-container_memory", "128", "-master_memory", "128")
	eventually.WithinEvery(t, 3*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		if n := runningTasks(pods.snapshot()); n < 2 {
			return fmt.Errorf("%d task containers running, want the job's 2", n)
		}
		if n := subs.count(); n < 3 {
			return fmt.Errorf("%d submissions accepted", n)
		}
		return nil
	})
	jobs.cancel()
	return subs, jobs
}

// stop lets the jobs running finish, starts no more, and fails t unless
// every job succeeded; it returns the jobs' application ids.
func (j *shellJobs) stop(t *testing.T) map[string]bool {
	t.Helper()
	j.cancel()
	j.wg.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.results {
		t.Errorf("distshell job failed: %s", r)
	}
	t.Logf("%d distshell jobs, %d failed", j.ran, len(j.results))
	return j.apps
}

// standbyUp waits until RM i answers its admin port as a standby.
func standbyUp(t *testing.T, c *localcluster.Cluster, i int) {
	t.Helper()
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		if st := serviceState(ctx, c.RMs[i].Admin); st != "STANDBY" {
			return fmt.Errorf("rm%d: %s", i+1, st)
		}
		return nil
	})
}

// TestKillingEachRMInTurnLosesNoSubmissionNorContainer kills the active
// RM with SIGKILL ten times while a client submits an unmanaged
// application every 300 ms through its failover client and two lanes of
// distshell jobs run. The killed replica is back at once as a standby and
// races the other for the Lease, so which replica dies each time is the
// election's choice (the log counts them). Every submission the RM
// answered is known to the last active RM and ends; no submission fails
// (the client only fails over); every distshell job succeeds, each of
// their containers ran in one pod and never twice; and the store's writes
// show one leader at a time.
func TestKillingEachRMInTurnLosesNoSubmissionNorContainer(t *testing.T) {
	const kills = 10
	c := reliabilityCluster(t, 2)
	startHARMs(t, c, localcluster.Identities{})
	appsRec, clusterRec := storeRecorders(t, c)
	pods := podRecorder(t, c)
	active := activeRM(t, c)
	standbyUp(t, c, 1-active)

	subs := startSubmitter(t, c, 300*time.Millisecond)
	jobs := startShellJobs(c, 2, "-shell_command", "sleep", "-shell_args", "4",
		"-num_containers", "2", "-container_memory", "128", "-master_memory", "128")
	var killedBy [2]int
	for k := range kills {
		// Kill once the stream has gone on and a job's containers run, so
		// that every failover meets submissions and containers mid-way.
		before := subs.count()
		eventually.WithinEvery(t, 2*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
			if n := subs.count(); n < before+3 {
				return fmt.Errorf("%d submissions since the last kill", n-before)
			}
			if n := runningTasks(pods.snapshot()); n == 0 {
				return errors.New("no task container running")
			}
			return nil
		})
		pid := c.RMPIDs()[fmt.Sprintf("rm%d", active+1)]
		t.Logf("kill %d: rm%d (pid %d), %d submissions accepted", k+1, active+1, pid, subs.count())
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("rm%d", active+1)
		eventually.WithinEvery(t, time.Minute, 50*time.Millisecond, func(context.Context) error {
			if now := c.RMPIDs()[name]; now == 0 || now == pid {
				return fmt.Errorf("%s not restarted yet", name)
			}
			return nil
		})
		killedBy[active]++
		active = activeRM(t, c)
		standbyUp(t, c, 1-active)
	}
	t.Logf("kills of rm1 and rm2: %v", killedBy)
	apps := jobs.stop(t)
	subs.requireEveryAcceptedSubmissionEnds(t)
	launched, unlaunched := checkContainerStarts(t, pods.stop(), apps)
	if launched == 0 {
		t.Error("no container of a distshell job seen")
	}
	t.Logf("%d containers of %d distshell jobs launched, each once, in one pod; %d allocated and released unlaunched", launched, len(apps), unlaunched)
	requireOneLeaderAtATime(t, appsRec, clusterRec, kills+1)
}

// runningTasks counts the task pods last seen running a launched
// container (a pod runs from its allocation on, its launcher waiting for
// the AM's startContainers).
func runningTasks(events []watch.Event) int {
	phase := map[string]corev1.PodPhase{}
	for _, ev := range events {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.Labels[launch.LabelRole] != launch.RoleTask {
			continue
		}
		if _, launched := p.Annotations[launch.AnnotationContext]; ev.Type == watch.Deleted || !launched {
			delete(phase, string(p.UID))
			continue
		}
		phase[string(p.UID)] = p.Status.Phase
	}
	n := 0
	for _, ph := range phase {
		if ph == corev1.PodRunning {
			n++
		}
	}
	return n
}

// startAPIProxy starts a TCP proxy to the API server at target, for a
// test to cut as a network partition does, and closes it when the test
// ends.
func startAPIProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// proxiedKubeconfig writes a copy of the cluster's kubeconfig whose server
// is the proxy; the API server's certificate names 127.0.0.1, so TLS
// checks out through it.
func proxiedKubeconfig(t *testing.T, c *localcluster.Cluster, proxy, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.ControlPlane.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + proxy
	}
	path := filepath.Join(t.TempDir(), name+"-through-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAnAPIServerOutageLosesNoSubmission cuts both RMs off the API server
// for 30 s (a TCP proxy between them and it drops every connection and
// holds new ones unanswered; the nodes and this test still reach it) while
// a client submits an application every 500 ms and a distshell job's
// containers run. The leader, unable to renew its Lease, stops writing and
// hands over cleanly: by the end of the outage neither RM claims to be
// active, both still answer as standbys (HAServiceProtocol, and the web
// port's haState), and never are two active. Once the API server is back,
// one RM leads again: every submission it answered is known and ends, the
// submissions made during the outage went through (the client only
// retried), the job that ran through the outage succeeds and a new one
// does too, no container ran twice, and the store's writes show one
// leader at a time.
func TestAnAPIServerOutageLosesNoSubmission(t *testing.T) {
	const outage = 30 * time.Second
	c := reliabilityCluster(t, 2)
	proxy := startAPIProxy(t, strings.TrimPrefix(c.ControlPlane.Server, "https://"))
	startHARMs(t, c, localcluster.Identities{RMKubeconfig: proxiedKubeconfig(t, c, proxy.Addr(), "rms")})
	appsRec, clusterRec := storeRecorders(t, c)
	pods := podRecorder(t, c)
	leader := activeRM(t, c)
	standbyUp(t, c, 1-leader)

	subs, through := startLoad(t, c, pods, 500*time.Millisecond, "45")

	atCut := subs.count()
	t.Logf("cutting rm%d, the leader, and rm%d off the API server; %d submissions accepted", leader+1, 2-leader, atCut)
	proxy.SetCut(true)
	end := time.Now().Add(outage)
	var last []string
	for time.Now().Before(end) {
		last = rmStates(t.Context(), c)
		if n := strings.Count(strings.Join(last, ","), "ACTIVE"); n > 1 {
			t.Errorf("two active RMs without the API server: %v", last)
		}
		time.Sleep(time.Second)
	}
	// The Lease's renew deadline is a tenth of the outage: by now the
	// leader has stepped down, and both answer as standbys.
	last = rmStates(t.Context(), c)
	for i, st := range last {
		if st != "STANDBY" {
			t.Errorf("rm%d after %v without the API server: %s, want STANDBY", i+1, outage, st)
		}
		if ha := webHAState(t.Context(), c.RMs[i].Web); ha != "STANDBY" {
			t.Errorf("rm%d's /ws/v1/cluster/info after %v without the API server: haState %q, want STANDBY", i+1, outage, ha)
		}
	}
	duringCut := subs.count()
	proxy.SetCut(false)
	t.Logf("healed; %d submissions accepted during the outage", duringCut-atCut)

	leader = activeRM(t, c)
	standbyUp(t, c, 1-leader)
	t.Logf("rm%d active after the outage", leader+1)
	eventually.WithinEvery(t, 2*time.Minute, 100*time.Millisecond, func(context.Context) error {
		if n := subs.count(); n < duringCut+3 {
			return fmt.Errorf("%d submissions since the outage", n-duringCut)
		}
		return nil
	})
	apps := through.stop(t)
	out, err := runShellJob(localcluster.HadoopConfDir(c.ControlPlane.Dir), "-shell_command", "echo", "-shell_args", "after-the-outage",
		"-num_containers", "2", "-container_memory", "128", "-master_memory", "128")
	if err != nil || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("distshell after the outage: %v\n%s", err, tail(out, 40))
	}
	if m := submittedApp.FindStringSubmatch(out); m != nil {
		apps[m[1]] = true
	}
	subs.requireEveryAcceptedSubmissionEnds(t)
	launched, unlaunched := checkContainerStarts(t, pods.stop(), apps)
	t.Logf("%d containers of %d distshell jobs launched, each once, in one pod; %d allocated and released unlaunched", launched, len(apps), unlaunched)
	requireOneLeaderAtATime(t, appsRec, clusterRec, 2)
}

// rmStates is each RM's answer to getServiceState, or its error.
func rmStates(ctx context.Context, c *localcluster.Cluster) []string {
	out := make([]string, len(c.RMs))
	for i, rm := range c.RMs {
		out[i] = serviceState(ctx, rm.Admin)
	}
	return out
}

// webHAState is the haState an RM's web port gives in
// /ws/v1/cluster/info, or what went wrong.
func webHAState(ctx context.Context, web string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+web+"/ws/v1/cluster/info", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var info struct {
		ClusterInfo struct {
			HAState string `json:"haState"`
		} `json:"clusterInfo"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return fmt.Sprintf("status %d: %v", resp.StatusCode, err)
	}
	return info.ClusterInfo.HAState
}

// TestALeaderCutOffAloneIsReplacedAndWritesNothingMore cuts only the
// leader off the API server (each RM reaches it through a proxy of its
// own) for 20 s, while a client submits an application every 300 ms and a
// distshell job runs. The other RM takes the Lease while the deposed one
// still runs; then the cut heals and the deposed one comes back as a
// standby. Whatever the deposed leader tried to write while cut off never
// lands after its successor's first write: the store's writes, read from
// the API server in revision order, show one epoch at a time. And, as
// after a kill, no accepted submission is lost, the job succeeds, and no
// container ran twice.
func TestALeaderCutOffAloneIsReplacedAndWritesNothingMore(t *testing.T) {
	const cut = 20 * time.Second
	c := reliabilityCluster(t, 2)
	target := strings.TrimPrefix(c.ControlPlane.Server, "https://")
	proxies := []*tcpproxy.Proxy{startAPIProxy(t, target), startAPIProxy(t, target)}
	startHARMs(t, c, localcluster.Identities{RMKubeconfigs: []string{
		proxiedKubeconfig(t, c, proxies[0].Addr(), "rm1"), proxiedKubeconfig(t, c, proxies[1].Addr(), "rm2"),
	}})
	appsRec, clusterRec := storeRecorders(t, c)
	pods := podRecorder(t, c)
	deposed := activeRM(t, c)
	standbyUp(t, c, 1-deposed)

	subs, jobs := startLoad(t, c, pods, 300*time.Millisecond, "15")

	t.Logf("cutting rm%d, the leader, off the API server; %d submissions accepted", deposed+1, subs.count())
	healAt := time.Now().Add(cut)
	proxies[deposed].SetCut(true)
	// The deposed leader answers as active until its renew deadline, as
	// long as its fence lets it write; the other takes the Lease only
	// after the longer lease duration.
	leader := 1 - deposed
	eventually.WithinEvery(t, 2*time.Minute, 50*time.Millisecond, func(ctx context.Context) error {
		states := rmStates(ctx, c)
		if states[leader] != "ACTIVE" || states[deposed] == "ACTIVE" {
			return fmt.Errorf("rm%d not the only active RM yet: %v", leader+1, states)
		}
		return nil
	})
	t.Logf("rm%d took over", leader+1)
	atTakeover := subs.count()
	eventually.WithinEvery(t, 2*time.Minute, 100*time.Millisecond, func(context.Context) error {
		if n := subs.count(); n < atTakeover+3 {
			return fmt.Errorf("%d submissions since the takeover", n-atTakeover)
		}
		return nil
	})
	time.Sleep(time.Until(healAt))
	if st := serviceState(t.Context(), c.RMs[deposed].Admin); st != "STANDBY" {
		t.Errorf("rm%d, cut off: %s, want STANDBY", deposed+1, st)
	}
	proxies[deposed].SetCut(false)
	standbyUp(t, c, deposed)
	if now := activeRM(t, c); now != leader {
		t.Errorf("rm%d active after the cut healed, want rm%d still", now+1, leader+1)
	}
	atHeal := subs.count()
	eventually.WithinEvery(t, 2*time.Minute, 100*time.Millisecond, func(context.Context) error {
		if n := subs.count(); n < atHeal+3 {
			return fmt.Errorf("%d submissions since the cut healed", n-atHeal)
		}
		return nil
	})
	apps := jobs.stop(t)
	subs.requireEveryAcceptedSubmissionEnds(t)
	launched, unlaunched := checkContainerStarts(t, pods.stop(), apps)
	t.Logf("%d containers of %d distshell jobs launched, each once, in one pod; %d allocated and released unlaunched", launched, len(apps), unlaunched)
	requireOneLeaderAtATime(t, appsRec, clusterRec, 2)
}
