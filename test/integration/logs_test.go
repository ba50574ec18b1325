package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/cli/logs"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
)

// lockedBuffer is a bytes.Buffer written by a process and read by a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestARunningApplicationsLogsComeFromItsNodesWebPort runs `knit logs` on
// a running DistributedShell: the containers' logs come from knit-node's
// NodeManager web port, in yarn logs' LOCAL envelope.
func TestARunningApplicationsLogsComeFromItsNodesWebPort(t *testing.T) {
	dumpOnFailure(t)
	rm := knitRM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "sleep", "-shell_args", "20",
		"-num_containers", "1", "-container_memory", "128", "-master_memory", "128")
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "USER=dsuser")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-waited
	}()

	var app string
	eventually.True(t, time.Minute, "distshell to submit", func() bool {
		if m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(out.String()); m != nil {
			app = m[1]
		}
		return app != ""
	})
	c, err := ipc.Dial(ctx, rm.addrs.Client, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "dsuser", Errors: yarnerr.FromRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := logs.Config{RM: yarnrpc.NewApplicationClientProtocolClient(c), User: "dsuser"}
	var got string
	eventually.Within(t, 2*time.Minute, func(ctx context.Context) error {
		var stdout, stderr bytes.Buffer
		if code := logs.Run(ctx, []string{"-applicationId", app}, &stdout, &stderr, cfg); code != 0 {
			return errors.New(stderr.String())
		}
		got = stdout.String()
		// Both containers, the AM registered and the shell one started.
		if strings.Count(got, "\nLogType:directory.info\n") < 2 || !strings.Contains(got, "registered application master") {
			return errors.New("not every container has logs yet:\n" + got)
		}
		return nil
	})
	for _, want := range []string{
		"LogAggregationType: LOCAL\n",
		"LogType:AppMaster.stderr\n",
		"registered application master",
		") and so may not be complete.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("knit logs output lacks %q:\n%s", want, got)
		}
	}
	if !regexp.MustCompile(`(?m)^Container: container_\S+_000001 on \S+:\d+$`).MatchString(got) {
		t.Errorf("no AM container header:\n%s", got)
	}
}
