package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/eventually"
	"github.com/knitdev/knit/test/localcluster"
	"github.com/knitdev/knit/test/supervise"
)

// A cluster whose nodes run the AMRMProxy: the distshell AM finds its
// scheduler in the HADOOP_CONF_DIR its node gives it, heartbeats through
// the proxy, and finishes SUCCEEDED, while the token in its token file is
// the node's, which the RM refuses. knit-node is killed while the AM and
// its containers run, as a DaemonSet rollout would: the restarted one
// recovers the AM's pipeline and its keys, and the AM heartbeats on with
// the token it holds.
func TestDistributedShellThroughTheNodesAMRMProxySucceedsWithoutTheRMsTokenAcrossAKnitNodeRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	port := freePort(t, localcluster.NodeAddress(0))
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: hadoopconf.KeyAMRMProxyEnabled, Value: "true"},
		hadoopconf.Property{Name: hadoopconf.KeyAMRMProxyAddress, Value: "0.0.0.0:" + strconv.Itoa(port)})
	run := knitLocal(t, dir)
	if out, err := run("up", "--nodes", "1", "--conf-dir", confDir); err != nil {
		t.Fatalf("knit local up: %v\n%s", err, out)
	}
	dumpLogsOnFailure(t, dir)
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	// The client names only the RM: the AM takes its scheduler from its
	// container's configuration, as a Java AM does from its classpath.
	clientConf := t.TempDir()
	writeConfFile(t, filepath.Join(clientConf, "yarn-site.xml"), hadoopconf.Property{Name: hadoopconf.KeyRMAddress, Value: settings.Address})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// The containers outlast knit-node's restart.
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "distshell"), "-shell_command", "sleep", "-shell_args", "15",
		"-num_containers", "2", "-container_memory", "128", "-master_memory", "128")
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+clientConf, "USER=dsuser")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// The AM's token file, read while the AM runs.
	var amToken token.Token
	eventually.Within(t, 2*time.Minute, func(context.Context) error {
		files, _ := filepath.Glob(filepath.Join(localcluster.NodeLocalDir(dir, localcluster.NodeName(0)), "usercache", "*", "appcache", "*", "container_*_01_000001", "container_tokens"))
		if len(files) == 0 {
			return errors.New("no AM token file yet")
		}
		creds, err := client.ReadCredentialsFile(files[0])
		if err != nil {
			return err
		}
		amToken, err = client.AMRMToken(creds)
		return err
	})
	var id yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(amToken.Identifier, &id); err != nil || id.GetAppAttemptId().GetAttemptId() != 1 {
		t.Fatalf("the AM's token names %v (%v), want an AMRMTokenIdentifier of the first attempt", &id, err)
	}
	// The RM refuses it: the AM does not hold the RM's token.
	rm, err := ipc.NewClient(settings.SchedulerAddress, ipc.ClientConfig{Protocol: yarnrpc.ApplicationMasterProtocolName, Token: amToken.Proto(), Logger: slog.New(slog.DiscardHandler), Errors: yarnerr.FromRemote,
		NewBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	if _, err := yarnrpc.NewApplicationMasterProtocolClient(rm).Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)}); err == nil {
		t.Fatal("the RM took the token of the AM's token file")
	}

	// Both containers localized: the AM registered and heartbeats. The
	// node's knit-node goes; its supervisor starts it again.
	appcache := filepath.Join(localcluster.NodeLocalDir(dir, localcluster.NodeName(0)), "usercache", "*", "appcache", "*")
	eventually.Within(t, 2*time.Minute, func(context.Context) error {
		for _, c := range []string{"container_*_01_000002", "container_*_01_000003"} {
			if m, _ := filepath.Glob(filepath.Join(appcache, c)); len(m) == 0 {
				return errors.New("containers not started yet")
			}
		}
		return nil
	})
	restartKnitNode(ctx, t, dir, "knit-node-"+localcluster.NodeName(0))

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("distshell: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("distshell did not end\n%s", out.String())
	}
	if s := out.String(); !strings.Contains(s, "FINISHED") || !strings.Contains(s, "SUCCEEDED") {
		t.Fatalf("distshell output lacks FINISHED/SUCCEEDED:\n%s", s)
	}
	b, err := os.ReadFile(filepath.Join(dir, "logs", "knit-node-"+localcluster.NodeName(0)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"AMRMProxy pipeline started", "AMRMProxy pipeline recovered", "AMRMProxy pipeline ended"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("knit-node's log lacks %q", want)
		}
	}
}

// restartKnitNode kills the named knit-node of the local cluster in dir
// and waits until its supervisor has it running again.
func restartKnitNode(ctx context.Context, t *testing.T, dir, name string) {
	t.Helper()
	find := func() (supervise.Status, error) {
		st, err := localcluster.StatusOf(ctx, dir)
		if err != nil {
			return supervise.Status{}, err
		}
		for _, c := range st.Components {
			if c.Name == name {
				return c, nil
			}
		}
		return supervise.Status{}, fmt.Errorf("no component %s", name)
	}
	before, err := find()
	if err != nil {
		t.Fatal(err)
	}
	kill(t, name, before.PID)
	eventually.Within(t, 2*time.Minute, func(context.Context) error {
		now, err := find()
		if err != nil {
			return err
		}
		if !now.Running || now.PID == before.PID || now.Restarts <= before.Restarts {
			return fmt.Errorf("%s: %+v", name, now)
		}
		return nil
	})
}

// freePort is a port free on addr now.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
