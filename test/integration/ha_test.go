package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// haCluster is a local cluster of its own with two knit-rm replicas, o
// giving the rest; on failure the test shows each replica's log.
func haCluster(t *testing.T, name string, o localcluster.Options) *localcluster.Cluster {
	t.Helper()
	if err := knitBinaries(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	o.Dir, o.RMs, o.Logger = filepath.Join(t.TempDir(), "local"), 2, clusterLogger().With("cluster", name)
	c, err := localcluster.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(c.ControlPlane.Dir, "logs", "knit-rm*.log"))
			for _, p := range logs {
				if b, err := os.ReadFile(p); err == nil {
					t.Logf("%s:\n%s", filepath.Base(p), tail(string(b), 80))
				}
			}
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c
}

// serviceState asks an RM's admin port for its HA state, as `yarn rmadmin
// -getServiceState` does; the error when it does not answer.
func serviceState(ctx context.Context, admin string) string {
	c, err := ipc.NewClient(admin, ipc.ClientConfig{Protocol: commonrpc.HAServiceProtocolName, User: "dsuser", Errors: yarnerr.FromRemote})
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := commonrpc.NewHAServiceProtocolClient(c).GetServiceStatus(ctx, &commonpb.GetServiceStatusRequestProto{})
	if err != nil {
		return err.Error()
	}
	return st.GetState().String()
}

// activeRM waits until exactly one RM is active and returns its index.
func activeRM(t *testing.T, c *localcluster.Cluster) int {
	t.Helper()
	active := -1
	eventually.Within(t, 2*time.Minute, func(ctx context.Context) error {
		var states []string
		active = -1
		for i, rm := range c.RMs {
			st := serviceState(ctx, rm.Admin)
			states = append(states, st)
			if st == "ACTIVE" {
				if active >= 0 {
					return fmt.Errorf("two active RMs: %v", states)
				}
				active = i
			}
		}
		if active < 0 {
			return fmt.Errorf("no active RM: %v", states)
		}
		return nil
	})
	return active
}

// TestKillingTheActiveRMLosesNoJob runs 20 distshell jobs on two RMs,
// kills the active one with SIGKILL once every job's AM and containers
// run, and expects every job to finish SUCCEEDED through the other: clients
// and AMs fail over (the client's yarn-site.xml lists both RMs), and the
// new leader recovers the applications, their attempts and their
// containers, each launched once in one pod, none lost. Before the kill,
// the standby refuses a plain (non-failover) client with StandbyException,
// and its web port says STANDBY.
func TestKillingTheActiveRMLosesNoJob(t *testing.T) {
	// All 20 run at once: AMs may take the whole queue, and the smallest
	// container is the 128 MB the jobs ask for (20 × 3 × 128 MB of the
	// 32 GiB two nodes hold).
	confDir := t.TempDir()
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"), hadoopconf.Property{Name: "yarn.scheduler.minimum-allocation-mb", Value: "128"})
	writeConfFile(t, filepath.Join(confDir, "capacity-scheduler.xml"), append(queuesOf("default"),
		hadoopconf.Property{Name: "yarn.scheduler.capacity.maximum-am-resource-percent", Value: "1.0"})...)
	// 60 containers of a vcore each: more CPUs than procnode's 8 a node
	// (they sleep; what is counted is what they ask for).
	c := haCluster(t, "ha", localcluster.Options{Nodes: 2, ConfDir: confDir, RMCommand: []string{filepath.Join(binDir, "knit-rm")},
		NodeCapacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}})
	active := activeRM(t, c)
	standby := c.RMs[1-active]
	pods := podRecorder(t, c)

	// A Hadoop client without failover, on the standby: StandbyException,
	// with the message a YARN standby gives.
	plain, err := ipc.NewClient(standby.Client, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "dsuser", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	_, err = yarnrpc.NewApplicationClientProtocolClient(plain).GetNewApplication(t.Context(), &yarnpb.GetNewApplicationRequestProto{})
	plain.Close()
	if e, ok := yarnerr.Find(err); !ok || e.Class != yarnerr.Standby || e.Message != fmt.Sprintf("ResourceManager rm%d is not Active!", 2-active) {
		t.Fatalf("standby's getNewApplication = %v, want StandbyException", err)
	}
	var info struct {
		ClusterInfo struct {
			HAState string `json:"haState"`
		} `json:"clusterInfo"`
	}
	resp, err := http.Get("http://" + standby.Web + "/ws/v1/cluster/info")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.ClusterInfo.HAState != "STANDBY" {
		t.Fatalf("standby's cluster info: haState %q, %v", info.ClusterInfo.HAState, err)
	}

	// The jobs, each with containers that outlive the failover.
	const jobs, perJob = 20, 2
	conf := localcluster.HadoopConfDir(c.ControlPlane.Dir)
	type result struct {
		out string
		err error
	}
	results := make([]result, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "sleep", "-shell_args", "45",
				"-num_containers", fmt.Sprint(perJob), "-container_memory", "128", "-master_memory", "128")
			cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+conf, "USER=dsuser")
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			err := cmd.Run()
			results[i] = result{buf.String(), err}
		}()
	}
	// Kill once every job runs: its AM and its containers.
	eventually.WithinEvery(t, 5*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: launch.LabelRole})
		if err != nil {
			return err
		}
		running := map[string]int{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running[p.Labels[launch.LabelRole]]++
			}
		}
		if running[launch.RoleAM] < jobs || running[launch.RoleTask] < jobs*perJob {
			return fmt.Errorf("%d AMs and %d task containers running, want %d and %d", running[launch.RoleAM], running[launch.RoleTask], jobs, jobs*perJob)
		}
		return nil
	})
	pid := c.RMPIDs()[fmt.Sprintf("rm%d", active+1)]
	if pid == 0 {
		t.Fatal("no pid for the active RM")
	}
	t.Logf("killing rm%d (pid %d)", active+1, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	apps := map[string]bool{}
	for i, r := range results {
		if r.err != nil || !strings.Contains(r.out, "SUCCEEDED") {
			t.Errorf("job %d: %v\n%s", i, r.err, tail(r.out, 40))
		}
		if m := submittedApp.FindStringSubmatch(r.out); m != nil {
			apps[m[1]] = true
		}
	}
	if len(apps) != jobs {
		t.Errorf("%d jobs said which application they submitted, want %d", len(apps), jobs)
	}
	launched, unlaunched := checkContainerStarts(t, pods.stop(), apps)
	t.Logf("%d containers of %d distshell jobs launched, each once, in one pod; %d allocated and released unlaunched", launched, len(apps), unlaunched)
	// The killed RM came back at once (supervised) as a standby; the
	// standby that had waited longer for the Lease usually took it.
	t.Logf("rm%d active after the kill of rm%d", activeRM(t, c)+1, active+1)
}
