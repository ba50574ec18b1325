package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
)

// runningContainer is one container of an unmanaged AM, started on its
// node and running, with the clients that reached it.
type runningContainer struct {
	rmc *client.RMClient
	am  *client.AMRMClient
	nm  *client.NMClient
	ctr *yarnpb.ContainerProto
}

// startOneContainer submits an unmanaged AM, registers it, gets one
// container of 128 MB and starts command in it, waiting until its pod runs.
func startOneContainer(t *testing.T, command string) *runningContainer {
	t.Helper()
	rmc, err := client.NewRMClient(knitRM(t).addrs.Client, client.RMConfig{User: "dsuser"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rmc.Close() })
	ctx := t.Context()
	newApp, err := rmc.GetNewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	app := newApp.GetApplicationId()
	err = rmc.SubmitApplication(ctx, &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: app, ApplicationName: proto.String("one-container"), Queue: proto.String("default"),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource: yarnpb.NewResource(128, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rmc.KillApplication(ctx, app, "test over") })
	var amrm *yarnpb.ApplicationReportProto
	eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		if amrm, err = rmc.GetApplicationReport(ctx, app); err != nil {
			t.Fatal(err)
		}
		if amrm.GetAmRmToken() == nil {
			return errors.New("no AMRMToken for the unmanaged AM")
		}
		return nil
	})
	am, err := client.NewAMRMClient(knitRM(t).addrs.Scheduler, client.AMRMConfig{Token: token.FromProto(amrm.GetAmRmToken())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { am.Close() })
	if _, err := am.Register(ctx, "test-am", -1, ""); err != nil {
		t.Fatal(err)
	}
	nm := client.NewNMClient(am.NMTokens(), client.NMConfig{})
	t.Cleanup(func() { nm.Close() })

	r := &runningContainer{rmc: rmc, am: am, nm: nm}
	r.heartbeat(t, "allocation", &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask(1, "*", 1, 128, 1, true)}},
		func(resp *yarnpb.AllocateResponseProto) bool {
			if got := resp.GetAllocatedContainers(); len(got) > 0 {
				r.ctr = got[0]
			}
			return r.ctr != nil
		})
	if _, err := nm.StartContainer(ctx, r.ctr, &yarnpb.ContainerLaunchContextProto{Command: []string{command}}); err != nil {
		t.Fatal(err)
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		if phase := r.pod(t).Status.Phase; phase != corev1.PodRunning {
			return fmt.Errorf("the container's pod is %s, want Running", phase)
		}
		return nil
	})
	return r
}

// heartbeat allocates with req first, then empty, until done holds.
func (r *runningContainer) heartbeat(t *testing.T, what string, req *yarnpb.AllocateRequestProto, done func(*yarnpb.AllocateResponseProto) bool) {
	t.Helper()
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		resp, err := r.am.Allocate(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if done(resp) {
			return nil
		}
		req = nil
		return fmt.Errorf("%s: no answer", what)
	})
}

// pod is the container's pod as the API server has it now.
func (r *runningContainer) pod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods, err := cluster.Client.CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{
		LabelSelector: launch.LabelContainer + "=" + containerName(r.ctr)})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the container's pod: %v", err)
	}
	return &pods.Items[0]
}

// TestContainerResizeGoesThroughThePodResizeSubresource runs an unmanaged AM
// that starts one container, then grows it (answered once the node took the
// new size, then brought to the NM with its new token), shrinks it (answered
// at once) and sends a stale version (refused as YARN refuses it).
func TestContainerResizeGoesThroughThePodResizeSubresource(t *testing.T) {
	dumpOnFailure(t)
	r := startOneContainer(t, "sleep 600")
	ctx, am, nm, ctr, rmc := t.Context(), r.am, r.nm, r.ctr, r.rmc
	heartbeat := func(what string, req *yarnpb.AllocateRequestProto, done func(*yarnpb.AllocateResponseProto) bool) {
		t.Helper()
		r.heartbeat(t, what, req, done)
	}
	pod := func() *corev1.Pod { t.Helper(); return r.pod(t) }
	memory := func(p *corev1.Pod) (spec, running string) {
		for i, c := range p.Spec.Containers {
			if c.Name == launch.ContainerName {
				spec = c.Resources.Limits.Memory().String()
				if s := p.Status.ContainerStatuses; i < len(s) && s[i].Resources != nil {
					running = s[i].Resources.Limits.Memory().String()
				}
			}
		}
		return spec, running
	}
	update := func(version int32, typ yarnpb.ContainerUpdateTypeProto, mb int64) *yarnpb.AllocateRequestProto {
		return &yarnpb.AllocateRequestProto{UpdateRequests: []*yarnpb.UpdateContainerRequestProto{{
			ContainerId: ctr.GetId(), ContainerVersion: proto.Int32(version), UpdateType: typ.Enum(), Capability: yarnpb.NewResource(mb, 1)}}}
	}

	// Grow: answered once the node resized the pod.
	var grown *yarnpb.ContainerProto
	heartbeat("increase", update(0, yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, 512), func(r *yarnpb.AllocateResponseProto) bool {
		if e := r.GetUpdateErrors(); len(e) > 0 {
			t.Fatalf("increase refused: %v", e)
		}
		for _, u := range r.GetUpdatedContainers() {
			if u.GetUpdateType() == yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE {
				grown = u.GetContainer()
			}
		}
		return grown != nil
	})
	if grown.GetVersion() != 1 || grown.GetResource().GetMemory() != 512 || proto.Equal(grown.GetContainerToken(), ctr.GetContainerToken()) {
		t.Errorf("grown container: version %d, %d MB, new token %v; want 1, 512, true",
			grown.GetVersion(), grown.GetResource().GetMemory(), !proto.Equal(grown.GetContainerToken(), ctr.GetContainerToken()))
	}
	if spec, running := memory(pod()); spec != "512Mi" || running != "512Mi" {
		t.Errorf("pod memory after the increase: spec %s, running %s; want 512Mi", spec, running)
	}
	// The NM takes the new token once, and never an older one.
	if err := nm.UpdateContainer(ctx, grown); err != nil {
		t.Fatalf("updateContainer with the new token: %v", err)
	}
	if got := pod().Annotations[launch.AnnotationNodeVersion]; got != "1" {
		t.Errorf("node version %q after updateContainer, want 1", got)
	}
	err := nm.UpdateContainer(ctx, ctr)
	if err == nil || !strings.Contains(err.Error(), "has update version [1] >= requested version [0]") {
		t.Errorf("updateContainer with the old token: %v", err)
	}

	// Shrink: answered in the same allocate, pushed to the node by the RM.
	resp, err := am.Allocate(ctx, update(1, yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE, 256))
	if err != nil {
		t.Fatal(err)
	}
	u := resp.GetUpdatedContainers()
	if len(u) != 1 || u[0].GetUpdateType() != yarnpb.ContainerUpdateTypeProto_DECREASE_RESOURCE ||
		u[0].GetContainer().GetVersion() != 2 || u[0].GetContainer().GetResource().GetMemory() != 256 {
		t.Fatalf("decrease answered with %v", u)
	}
	want := resource.MustParse("256Mi")
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(context.Context) error {
		if spec, running := memory(pod()); spec != want.String() || running != want.String() {
			return fmt.Errorf("pod memory after the decrease: spec %s, running %s; want 256Mi", spec, running)
		}
		return nil
	})

	// A stale version is refused with the current one.
	resp, err = am.Allocate(ctx, update(0, yarnpb.ContainerUpdateTypeProto_INCREASE_RESOURCE, 1024))
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.GetUpdateErrors(); len(e) != 1 || e[0].GetReason() != "INCORRECT_CONTAINER_VERSION_ERROR" || e[0].GetCurrentContainerVersion() != 2 {
		t.Errorf("stale update answered with %v", e)
	}
	reports, err := rmc.GetContainers(ctx, ctr.GetId().GetAppAttemptId())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		if proto.Equal(r.GetContainerId(), ctr.GetId()) && r.GetResource().GetMemory() != 256 {
			t.Errorf("container report after the updates: %d MB, want 256", r.GetResource().GetMemory())
		}
	}
}

// containerName is a container's id as its pod's label holds it.
func containerName(c *yarnpb.ContainerProto) string {
	id, _ := yarnid.ContainerIDFromProto(c.GetId())
	return id.String()
}

// TestAThreadDumpReachesTheContainerAsSIGQUIT signals a running container
// through the RM's signalToContainer, as `yarn container -signal
// OUTPUT_THREAD_DUMP` does; the NodeManager sends SIGQUIT, which a JVM
// answers with a thread dump on its stdout.
func TestAThreadDumpReachesTheContainerAsSIGQUIT(t *testing.T) {
	dumpOnFailure(t)
	r := startOneContainer(t, "{ trap 'echo thread dump' QUIT; echo started; while :; do sleep 0.1; done; } 1><LOG_DIR>/stdout")
	id, _ := yarnid.ContainerIDFromProto(r.ctr.GetId())
	stdoutHas := func(what string) {
		t.Helper()
		eventually.WithinEvery(t, time.Minute, 100*time.Millisecond, func(context.Context) error {
			if logs := containerLogs(t, id.Attempt.App, "stdout"); !strings.Contains(logs[id.String()], what) {
				return fmt.Errorf("no %q in the container's stdout: %q", what, logs)
			}
			return nil
		})
	}
	// A NodeManager signals only a process that runs: not one still being
	// localized.
	stdoutHas("started")
	req := &yarnpb.SignalContainerRequestProto{ContainerId: r.ctr.GetId(), Command: yarnpb.SignalContainerCommandProto_OUTPUT_THREAD_DUMP.Enum()}
	if err := knitRM(t).call("dsuser", "signalToContainer", req, &yarnpb.SignalContainerResponseProto{}); err != nil {
		t.Fatalf("signalToContainer: %v", err)
	}
	stdoutHas("thread dump")
}
