package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// The local cluster supervises its processes as Kubernetes would (package
// supervise): these tests kill one with SIGKILL while work runs and check
// that it comes back and the work carries on.

// shellJob is a distshell run in the background whose containers each
// append their container id to a file of the test's, then sleep, so that
// the test knows when they all run and whether any ran twice.
type shellJob struct {
	marks string
	n     int
	done  chan error
	out   bytes.Buffer
}

func startShellJob(t *testing.T, containers int, sleep time.Duration) *shellJob {
	t.Helper()
	knitRM(t)
	j := &shellJob{marks: filepath.Join(t.TempDir(), "marks"), n: containers, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Minute)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"),
		"-shell_command", fmt.Sprintf("echo $CONTAINER_ID >> %s; sleep %d", j.marks, int(sleep.Seconds())),
		"-num_containers", fmt.Sprint(containers), "-container_memory", "128", "-master_memory", "128")
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "USER=dsuser")
	cmd.Stdout, cmd.Stderr = &j.out, &j.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		j.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-j.done
	})
	return j
}

// started is the container ids that have run so far, once each or more.
func (j *shellJob) started() []string {
	b, _ := os.ReadFile(j.marks)
	return strings.Fields(string(b))
}

// waitRunning waits until every container of the job has started.
func (j *shellJob) waitRunning(t *testing.T) {
	t.Helper()
	eventually.WithinEvery(t, 3*time.Minute, 100*time.Millisecond, func(context.Context) error {
		if got := len(j.started()); got < j.n {
			return fmt.Errorf("%d of %d containers started", got, j.n)
		}
		return nil
	})
}

// waitSucceeded waits for the distshell client and checks that the job
// finished SUCCEEDED with each container run exactly once.
func (j *shellJob) waitSucceeded(t *testing.T) {
	t.Helper()
	select {
	case err := <-j.done:
		j.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("distshell: %v\n%s", err, j.out.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("distshell still runs after 5 minutes:\n%s", j.out.String())
	}
	if out := j.out.String(); !strings.Contains(out, "FINISHED") || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("distshell output lacks FINISHED/SUCCEEDED:\n%s", out)
	}
	ids := j.started()
	sorted := slices.Sorted(slices.Values(ids))
	if len(slices.Compact(sorted)) != len(ids) || len(ids) != j.n {
		t.Errorf("containers ran %v, want %d containers once each", ids, j.n)
	}
}

// kill sends SIGKILL to a process of the cluster.
func kill(t *testing.T, name string, pid int) {
	t.Helper()
	if pid == 0 {
		t.Fatalf("%s is not running", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s (pid %d): %v", name, pid, err)
	}
	t.Logf("killed %s (pid %d)", name, pid)
}

// waitRestarted waits until the named process runs again after more than
// restarts restarts, under another pid than pid.
func waitRestarted(t *testing.T, name string, pid, restarts int) {
	t.Helper()
	eventually.WithinEvery(t, 2*time.Minute, 100*time.Millisecond, func(context.Context) error {
		st, ok := cluster.Component(name)
		if !ok {
			return fmt.Errorf("no component %s", name)
		}
		if !st.Running || st.PID == pid || st.Restarts <= restarts {
			return fmt.Errorf("%s: %+v", name, st)
		}
		return nil
	})
}

func component(t *testing.T, name string) (pid, restarts int) {
	t.Helper()
	st, ok := cluster.Component(name)
	if !ok {
		t.Fatalf("the cluster runs no %s", name)
	}
	return st.PID, st.Restarts
}

func TestKnitRMKilledDuringAJobIsRestartedAndTheJobSucceeds(t *testing.T) {
	dumpOnFailure(t)
	job := startShellJob(t, 3, 8*time.Second)
	job.waitRunning(t)
	pid, restarts := component(t, "knit-rm")
	kill(t, "knit-rm", pid)
	waitRestarted(t, "knit-rm", pid, restarts)
	job.waitSucceeded(t)
}

func TestKnitNodeKilledDuringAJobLeavesItsContainersRunningAndStartsNewOnes(t *testing.T) {
	dumpOnFailure(t)
	job := startShellJob(t, 3, 8*time.Second)
	job.waitRunning(t)
	name := "knit-node-" + cluster.Nodes[0].Name
	pid, restarts := component(t, name)
	kill(t, name, pid)
	waitRestarted(t, name, pid, restarts)
	// The containers running while knit-node was down finish as they were.
	job.waitSucceeded(t)

	// New containers start on every node, the restarted one among them:
	// there are more of them than nodes, and the scheduler spreads them.
	next := startShellJob(t, 2*len(cluster.Nodes), 0)
	next.waitSucceeded(t)
	onNode := 0
	for _, id := range next.started() {
		if containerRanOn(cluster.Nodes[0].Name, id) {
			onNode++
		}
	}
	if onNode == 0 {
		t.Errorf("no container of the next job ran on %s, whose knit-node was restarted", cluster.Nodes[0].Name)
	}
}

// containerRanOn says whether the container's log folder is on node, or
// its logs in the node's aggregated file once uploaded.
func containerRanOn(node, containerID string) bool {
	matches, _ := filepath.Glob(filepath.Join(localcluster.NodeLogDir(cluster.ControlPlane.Dir, node), "application_*", containerID))
	if len(matches) > 0 {
		return true
	}
	id, err := yarnid.ParseContainerID(containerID)
	if err != nil {
		return false
	}
	for _, n := range cluster.Nodes {
		if n.Name != node {
			continue
		}
		for nodeFile, byContainer := range aggregatedLogs(cluster.ControlPlane.Dir, id.Attempt.App, "") {
			if _, ok := byContainer[containerID]; ok && strings.HasPrefix(nodeFile, n.Address+"_") {
				return true
			}
		}
	}
	return false
}

func TestAPIServerKilledIsRestartedAndTheClusterRecovers(t *testing.T) {
	dumpOnFailure(t)
	knitRM(t)
	pid, restarts := component(t, "kube-apiserver")
	kill(t, "kube-apiserver", pid)
	waitRestarted(t, "kube-apiserver", pid, restarts)
	eventually.WithinEvery(t, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		nodes, err := cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if !localcluster.Schedulable(&n) {
				return errors.New("node " + n.Name + " not ready")
			}
		}
		return nil
	})
	// The RM and the nodes' services reconnect: a job runs to the end.
	job := startShellJob(t, 2, 0)
	job.waitSucceeded(t)
}
