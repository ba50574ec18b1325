package rgs

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/scheduling"
)

func TestEndedReadsYARNExitStatusFromThePod(t *testing.T) {
	terminated := func(code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: launch.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}},
		}}}}
	}
	stopped := terminated(143, "")
	stopped.Annotations = map[string]string{launch.AnnotationStoppedBy: "appmaster"}
	evicted := terminated(137, "")
	evicted.Status.Reason, evicted.Status.Message = "Evicted", "The node was low on resource: memory."
	tests := []struct {
		name      string
		pod       *corev1.Pod
		exit      int32
		diag      string
		preempted bool
	}{
		{"a command's exit code", terminated(3, "Exception from container-launch."), 3, "Exception from container-launch.", false},
		{"a command exiting 255", terminated(255, "Exception from container-launch."), 255, "Exception from container-launch.", false},
		{"a localization failure is INVALID", terminated(launch.ExitLocalizationFailed, launch.LocalizationFailureMessage("Resource x changed on src filesystem")),
			ExitInvalid, "Resource x changed on src filesystem", false},
		{"a stop by the AM", stopped, ExitKilledByAppMaster, killedByAMDiagnostics(143), false},
		{"an eviction", evicted, ExitPreempted, "Container preempted by Kubernetes: Evicted: The node was low on resource: memory.", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, exit, diag, preempted := ended(record(tt.pod))
			if !done || exit != tt.exit || diag != tt.diag || preempted != tt.preempted {
				t.Errorf("ended = %v, %d, %q, %v; want true, %d, %q, %v", done, exit, diag, preempted, tt.exit, tt.diag, tt.preempted)
			}
		})
	}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if done, _, _, _ := ended(record(running)); done {
		t.Error("a running pod reads as ended")
	}
}

// oneNode knows node n1 as YARN's n1:8041.
type oneNode struct{}

func (oneNode) NodeID(name string) (*yarnpb.NodeIdProto, string, bool) {
	return &yarnpb.NodeIdProto{Host: proto.String(name), Port: proto.Int32(8041)}, name + ":8042", name == "n1"
}
func (oneNode) NodeName(host string) (string, bool) { return host, host == "n1" }

// sinkFunc takes or refuses every allocation; the rest it ignores.
type sinkFunc func(scheduling.Allocation) error

func (f sinkFunc) Allocated(_ context.Context, a scheduling.Allocation) error { return f(a) }
func (sinkFunc) Completed(context.Context, scheduling.Completion)             {}
func (sinkFunc) Preempting(context.Context, scheduling.Preemption)            {}
func (sinkFunc) Updated(context.Context, scheduling.UpdateResult)             {}

// podRig is a controller on a fake clientset whose informer cache is
// seeded with pods, its workers not running.
func podRig(t *testing.T, sink scheduling.Sink, pods ...*corev1.Pod) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(Config{Client: client, Signer: noSigner{}, Nodes: oneNode{}, PodFactory: factory,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.sink, c.epoch = sink, 3
	t.Cleanup(func() {
		c.podQueue.ShutDown()
		c.bookQueue.ShutDown()
		c.admitQueue.ShutDown()
		c.removeQueue.ShutDown()
	})
	client.ClearActions()
	return c, client
}

func TestABoundPodsSyncRecordsItsContainerWithOnePatch(t *testing.T) {
	take := func(scheduling.Allocation) error { return nil }
	tests := []struct {
		name string
		sink sinkFunc
		// patchErr fails the label patch.
		patchErr error
		wantErr  bool
		// wantAllocated: the container stands; wantRemoval: the pod is
		// queued to go.
		wantAllocated, wantRemoval bool
		// partition is the node-label partition the pod's ask named.
		partition string
	}{
		{name: "the Sink takes the container", sink: take, wantAllocated: true},
		{name: "the Sink refuses it: the pod goes through the removal queue",
			sink: func(scheduling.Allocation) error { return errors.New("attempt over") }, wantAllocated: true, wantRemoval: true},
		{name: "a failed patch is the queue's to retry", sink: take, patchErr: apierrors.NewServiceUnavailable("busy"), wantErr: true},
		{name: "a pod deleted meanwhile is done", sink: take, patchErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")},
		{name: "a labelled pod's container is told in its partition", sink: take, partition: "gpu", wantAllocated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := gatedPod("p", "root.a", 7, true)
			pod.Spec.NodeName = "n1"
			if tt.partition != "" {
				pod.Spec.NodeSelector = map[string]string{launch.NodeLabelPartition: tt.partition}
			}
			var told []scheduling.Allocation
			c, client := podRig(t, sinkFunc(func(a scheduling.Allocation) error {
				told = append(told, a)
				return tt.sink(a)
			}), pod)
			if tt.patchErr != nil {
				client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.patchErr
				})
			}
			err := c.syncPod(t.Context(), types.NamespacedName{Namespace: "ns", Name: "p"})
			if (err != nil) != tt.wantErr || err != nil && terminal(err) {
				t.Fatalf("sync: %v, want an error to retry: %v", err, tt.wantErr)
			}
			actions := client.Actions()
			if len(actions) != 1 {
				t.Fatalf("%d actions, want the label patch alone: %v", len(actions), actions)
			}
			patch, ok := actions[0].(k8stesting.PatchActionImpl)
			if !ok || patch.PatchOptions.FieldManager != fieldManager {
				t.Errorf("action %+v, want a patch by %s", actions[0], fieldManager)
			}
			id := yarnid.ContainerID{Attempt: yarnid.AttemptID{App: yarnid.ApplicationID{ClusterTimestamp: 1, ID: 7}, ID: 1}, Epoch: 3, Sequence: 2}
			_, allocated := c.containers[id]
			if allocated != tt.wantAllocated || len(told) != btoi(tt.wantAllocated) {
				t.Errorf("container %s allocated %v, Sink told %d times; want %v", id, allocated, len(told), tt.wantAllocated)
			}
			for _, a := range told {
				if a.Partition != tt.partition {
					t.Errorf("Sink told the container in partition %q, want %q", a.Partition, tt.partition)
				}
			}
			if _, mapped := c.byPod[pod.UID]; mapped != tt.wantAllocated {
				t.Errorf("pod mapped to a container: %v, want %v", mapped, tt.wantAllocated)
			}
			if got := c.removeQueue.Len() == 1; got != tt.wantRemoval {
				t.Errorf("removal queued %v, want %v", got, tt.wantRemoval)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestADeletedPodIsReportedByItsWorkerNotByTheInformersHandler(t *testing.T) {
	pod := runningPod("p", "root.a", 7, 2)
	id, _ := containerOf(record(pod))
	tests := []struct {
		name string
		// deleted is what the informer hands the delete handler.
		deleted any
	}{
		{"the deleted pod", pod},
		{"a tombstone of a missed delete", cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var done []scheduling.Completion
			c, client := podRig(t, completions(&done))
			c.containers[id] = types.NamespacedName{Namespace: "ns", Name: "p"}
			c.byPod[pod.UID] = id
			c.podDeleted(tt.deleted)
			if len(done) != 0 || c.podQueue.Len() != 1 {
				t.Fatalf("the handler reported %v and queued %d keys; want nothing reported, the pod's key queued", done, c.podQueue.Len())
			}
			c.processPod(t.Context())
			if len(done) != 1 || done[0].Container != id || !done[0].Vanished || done[0].ExitStatus != ExitAborted {
				t.Errorf("reported %+v, want %s vanished, aborted", done, id)
			}
			if _, ok := c.containers[id]; ok || len(c.byPod) != 0 || len(c.reported) != 0 || len(c.gone) != 0 {
				t.Errorf("the deleted container is still kept")
			}
			if a := client.Actions(); len(a) != 0 {
				t.Errorf("actions %v, want none", a)
			}
		})
	}
}

// completions is a Sink that takes every allocation and records ends.
func completions(done *[]scheduling.Completion) scheduling.Sink {
	return completionSink{done}
}

type completionSink struct{ done *[]scheduling.Completion }

func (completionSink) Allocated(context.Context, scheduling.Allocation) error { return nil }
func (s completionSink) Completed(_ context.Context, c scheduling.Completion) {
	*s.done = append(*s.done, c)
}
func (completionSink) Preempting(context.Context, scheduling.Preemption) {}
func (completionSink) Updated(context.Context, scheduling.UpdateResult)  {}
