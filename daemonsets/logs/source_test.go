package logs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

func TestPodSourceReadsContainersAndKeepsTheApplicationsACLs(t *testing.T) {
	clc, err := proto.Marshal(&yarnpb.ContainerLaunchContextProto{Application_ACLs: []*yarnpb.ApplicationACLMapProto{
		{AccessType: yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP.Enum(), Acl: proto.String("bob,carol admins")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctxValue, err := launch.EncodeContext(launch.Context{ContainerID: runningCID, User: "alice", LaunchContext: clc})
	if err != nil {
		t.Fatal(err)
	}
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "apps",
			Labels: map[string]string{launch.LabelContainer: runningCID, launch.LabelApplication: runningApp},
			Annotations: map[string]string{launch.AnnotationContext: ctxValue,
				launch.AnnotationLogAggregationContext: `{"includePattern":"std","rolledLogsIncludePattern":"syslog"}`}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	done := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "apps",
			Labels: map[string]string{launch.LabelContainer: "container_1795680442682_0004_01_000006", launch.LabelUser: "alice"}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Message: "Exception from container-launch"}}}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourceCPU: resource.MustParse("8")}}}
	dirs := Dirs{t.TempDir()}
	// The localizer has made the running container's log folder.
	if err := os.MkdirAll(filepath.Join(dirs[0], runningApp, runningCID), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := NewPodSource(fake.NewClientset(running, done, node), "node-1", dirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = src.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	waitFor(t, "both containers", func() bool { return len(src.Containers()) == 2 })
	byID := map[string]Container{}
	for _, c := range src.Containers() {
		byID[c.ID] = c
	}
	if c := byID[runningCID]; c.State != "RUNNING" || c.User != "alice" || c.App != runningApp || c.MemoryMB != 512 || c.VCores != 1 || c.ExitCode != ExitInvalid {
		t.Errorf("running container %+v", c)
	}
	if c := byID["container_1795680442682_0004_01_000006"]; c.State != "DONE" || c.ExitCode != 3 || c.Diagnostics != "Exception from container-launch" || c.User != "alice" {
		t.Errorf("finished container %+v", c)
	}
	waitFor(t, "the application record", func() bool { _, ok := dirs.Record(runningApp); return ok })
	rec, _ := dirs.Record(runningApp)
	if rec.Owner != "alice" || len(rec.ACLs) != 1 || rec.ACLs[0].Type != "VIEW_APP" || rec.ACLs[0].Value != "bob,carol admins" {
		t.Errorf("record %+v", rec)
	}
	if lac := rec.LogAggregation; lac == nil || *lac != (launch.LogAggregationContext{IncludePattern: "std", RolledLogsIncludePattern: "syslog"}) {
		t.Errorf("log aggregation context kept %+v", lac)
	}
	a := Access{Enabled: true, Admin: acl.Parse(" "), Groups: func(u string) []string {
		if u == "dave" {
			return []string{"admins"}
		}
		return nil
	}}
	for who, want := range map[string]bool{"alice": true, "bob": true, "dave": true, "eve": false} {
		if got := a.CanView(who, rec.Owner, rec.ACLs); got != want {
			t.Errorf("CanView(%s) = %v", who, got)
		}
	}
	waitFor(t, "the node's capacity", func() bool { _, _, ok := src.Capacity(); return ok })
	if mem, cores, _ := src.Capacity(); mem != 8192 || cores != 8 {
		t.Errorf("capacity %d MB, %d vcores", mem, cores)
	}
}
