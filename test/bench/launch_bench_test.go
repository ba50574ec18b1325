package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/localcluster"
)

// launchSamples is how many containers each side of
// BenchmarkStartContainersVersusBarePod starts.
const launchSamples = 20

// buildKnit builds knit-rm, knit-launcher, knit-node and distshell into a
// folder of their own, as the local cluster runs them.
func buildKnit(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/knitdev/knit/cmd/knit-rm",
		"github.com/knitdev/knit/cmd/knit-launcher", "github.com/knitdev/knit/cmd/knit-node",
		"github.com/knitdev/knit/examples/distshell").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// waitFile polls for path and returns when it appeared.
func waitFile(ctx context.Context, path string) (time.Time, error) {
	for {
		if _, err := os.Stat(path); err == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkStartContainersVersusBarePod measures, on a warm cache, the time
// from an AM's startContainers call to its command running (the command
// touches a file) on a process node, against the same process node running
// the same command in a bare pod bound to it directly, in the same run. The
// Knit side goes through the NM relay, RKS's token checks, the pod patch,
// knit-node's localizer and knit-launcher's script; the bare side through
// the kubelet stand-in's pod start. The target is an overhead of
// at most 300 ms at p99.
func BenchmarkStartContainersVersusBarePod(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, _ := launchCluster(ctx, b)
	marks := b.TempDir()

	for range b.N {
		knit := knitStarts(ctx, b, c, marks)
		bare := bareStarts(ctx, b, c, marks)
		reportVersusBare(b, "knit", knit, bare)
	}
}

// reportVersusBare reports the p50 and p99 of Knit's side (named name) and
// of the bare pods, the p99 overhead and the p99 ratio.
func reportVersusBare(b *testing.B, name string, knit, bare []time.Duration) {
	p50k, p99k := quantile(knit, 0.5), quantile(knit, 0.99)
	p50b, p99b := quantile(bare, 0.5), quantile(bare, 0.99)
	b.ReportMetric(float64(p50k.Milliseconds()), name+"-p50-ms")
	b.ReportMetric(float64(p99k.Milliseconds()), name+"-p99-ms")
	b.ReportMetric(float64(p50b.Milliseconds()), "bare-p50-ms")
	b.ReportMetric(float64(p99b.Milliseconds()), "bare-p99-ms")
	b.ReportMetric(float64((p99k - p99b).Milliseconds()), "overhead-p99-ms")
	b.ReportMetric(float64(p99k)/float64(p99b), name+"/bare-p99")
}

// launchCluster starts a one-node local cluster with knit-rm and knit-node
// and returns it with the folder of Knit's binaries.
func launchCluster(ctx context.Context, b *testing.B) (*localcluster.Cluster, string) {
	b.Helper()
	bin := buildKnit(b)
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Stop(context.Background()) })
	// Small containers, so that all of them fit on the node at once.
	if _, err := c.StartRM(ctx, []string{filepath.Join(bin, "knit-rm"), "--millicores-per-vcore", "10"},
		hadoopconf.Property{Name: "yarn.scheduler.minimum-allocation-mb", Value: "128"}); err != nil {
		b.Fatal(err)
	}
	return c, bin
}

// BenchmarkSubmitToAMRegisteredVersusBarePod measures, on a warm cache, the
// time from submitApplication to the application RUNNING (its AM, the
// distshell binary shipped as a PUBLIC resource, has registered), against
// the same process node running a command in a bare pod, in the same run.
// The Knit side adds the AM's pod through RGS and the scheduler, its launch
// through RKS, knit-node and knit-launcher, and the AM's own start and
// registration; the RUNNING state is polled every 5 ms.
func BenchmarkSubmitToAMRegisteredVersusBarePod(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, bin := launchCluster(ctx, b)
	marks := b.TempDir()
	for range b.N {
		knit := amRegistrations(ctx, b, c, filepath.Join(bin, "distshell"))
		bare := bareStarts(ctx, b, c, marks)
		reportVersusBare(b, "registered", knit, bare)
	}
}

// amSamples is how many applications BenchmarkSubmitToAMRegisteredVersusBarePod
// submits, one after the other.
const amSamples = 10

// amRegistrations submits amSamples distshell applications one after the
// other, each with one sleeping shell container so that it stays RUNNING,
// timing submission → RUNNING, then kills it. The first, which fills the
// node's cache with the binary, is not counted.
func amRegistrations(ctx context.Context, b *testing.B, c *localcluster.Cluster, distshell string) []time.Duration {
	b.Helper()
	rmc, err := client.NewRMClient(c.RM.Client, client.RMConfig{User: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer rmc.Close()
	// The public cache takes only what every user may read, up the path.
	for dir := filepath.Dir(distshell); dir != filepath.Dir(dir) && strings.HasPrefix(dir, os.TempDir()+"/"); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	fi, err := os.Stat(distshell)
	if err != nil {
		b.Fatal(err)
	}
	binary := &yarnpb.LocalResourceProto{
		Resource: &yarnpb.URLProto{Scheme: proto.String("file"), File: proto.String(distshell)},
		Size:     proto.Int64(fi.Size()), Timestamp: proto.Int64(fi.ModTime().UnixMilli()),
		Type: yarnpb.LocalResourceTypeProto_FILE.Enum(), Visibility: yarnpb.LocalResourceVisibilityProto_PUBLIC.Enum(),
	}
	command := "./distshell am --scheduler_address " + c.RM.Scheduler +
		" --num_containers 1 --shell_command 'sleep 60' 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"
	var out []time.Duration
	for i := range amSamples + 1 {
		newApp, err := rmc.GetNewApplication(ctx)
		if err != nil {
			b.Fatal(err)
		}
		id := newApp.GetApplicationId()
		start := time.Now()
		err = rmc.SubmitApplication(ctx, &yarnpb.ApplicationSubmissionContextProto{
			ApplicationId: id, ApplicationName: proto.String("bench am"), Queue: proto.String("default"),
			ApplicationType: proto.String("YARN"),
			AmContainerSpec: &yarnpb.ContainerLaunchContextProto{
				LocalResources: []*yarnpb.StringLocalResourceMapProto{{Key: proto.String("distshell"), Value: binary}},
				Command:        []string{command},
			},
			Resource: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)},
		})
		if err != nil {
			b.Fatal(err)
		}
		for {
			r, err := rmc.GetApplicationReport(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			st := r.GetYarnApplicationState()
			if st == yarnpb.YarnApplicationStateProto_RUNNING {
				break
			}
			if st == yarnpb.YarnApplicationStateProto_FAILED || st == yarnpb.YarnApplicationStateProto_KILLED ||
				st == yarnpb.YarnApplicationStateProto_FINISHED {
				b.Fatalf("application %d ended %v before RUNNING: %s", i, st, r.GetDiagnostics())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if i > 0 {
			out = append(out, time.Since(start))
		}
		if err := rmc.KillApplication(ctx, id, "bench over"); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// knitStarts runs an unmanaged AM that gets launchSamples containers and
// starts each, one after the other, timing startContainers → command run.
func knitStarts(ctx context.Context, b *testing.B, c *localcluster.Cluster, marks string) []time.Duration {
	b.Helper()
	rmc, err := client.NewRMClient(c.RM.Client, client.RMConfig{User: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer rmc.Close()
	am, appID, err := unmanagedAM(ctx, rmc, c.RM.Scheduler)
	if err != nil {
		b.Fatal(err)
	}
	defer am.Close()
	ask := &yarnpb.ResourceRequestProto{
		Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}, ResourceName: proto.String("*"),
		Capability:    &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)},
		NumContainers: proto.Int32(launchSamples), RelaxLocality: proto.Bool(true), AllocationRequestId: proto.Int64(0),
	}
	var got []*yarnpb.ContainerProto
	req := &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{ask}}
	for len(got) < launchSamples {
		resp, err := am.Allocate(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		got = append(got, resp.GetAllocatedContainers()...)
		req = &yarnpb.AllocateRequestProto{}
		time.Sleep(100 * time.Millisecond)
	}
	b.Logf("%d containers allocated", len(got))
	// Let every launcher reach its wait: a started container then only
	// waits on Knit.
	time.Sleep(3 * time.Second)
	nm := client.NewNMClient(am.NMTokens(), client.NMConfig{})
	defer nm.Close()
	var out []time.Duration
	for i, ctr := range got {
		mark := filepath.Join(marks, "knit-"+strconv.Itoa(i))
		start := time.Now()
		if _, err := nm.StartContainer(ctx, ctr, &yarnpb.ContainerLaunchContextProto{Command: []string{"touch " + mark}}); err != nil {
			b.Fatal(err)
		}
		ran, err := waitFile(ctx, mark)
		if err != nil {
			b.Fatalf("container %d: %v", i, err)
		}
		out = append(out, ran.Sub(start))
	}
	if err := rmc.KillApplication(ctx, appID, "bench over"); err != nil {
		b.Fatal(err)
	}
	return out
}

// unmanagedAM submits an unmanaged application and registers as its AM
// with the AMRMToken from the application's report, as an unmanaged AM's
// launcher does.
func unmanagedAM(ctx context.Context, rmc *client.RMClient, scheduler string) (*client.AMRMClient, *yarnpb.ApplicationIdProto, error) {
	newApp, err := rmc.GetNewApplication(ctx)
	if err != nil {
		return nil, nil, err
	}
	id := newApp.GetApplicationId()
	err = rmc.SubmitApplication(ctx, &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId: id, ApplicationName: proto.String("bench"), Queue: proto.String("default"),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{},
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	})
	if err != nil {
		return nil, nil, err
	}
	var report *yarnpb.ApplicationReportProto
	for report.GetAmRmToken() == nil {
		if report, err = rmc.GetApplicationReport(ctx, id); err != nil {
			return nil, nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	am, err := client.NewAMRMClient(scheduler, client.AMRMConfig{Token: token.FromProto(report.GetAmRmToken())})
	if err != nil {
		return nil, nil, err
	}
	if _, err := am.Register(ctx, "bench", -1, ""); err != nil {
		am.Close()
		return nil, nil, err
	}
	return am, id, nil
}

// bareStarts creates launchSamples bare pods bound to the node, one after
// the other, timing pod creation → command run.
func bareStarts(ctx context.Context, b *testing.B, c *localcluster.Cluster, marks string) []time.Duration {
	b.Helper()
	ns := "bare-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := c.CreateNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	var out []time.Duration
	for i := range launchSamples {
		mark := filepath.Join(marks, "bare-"+strconv.Itoa(i))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "bare-" + strconv.Itoa(i), Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName:      c.Nodes[0].Name,
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "bench", Command: []string{"bash", "-c", "touch " + mark}}},
			},
		}
		start := time.Now()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		ran, err := waitFile(ctx, mark)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, ran.Sub(start))
	}
	return out
}
