package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/cli"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/test/localcluster"
)

// writeConfFile writes a Hadoop configuration file of props.
func writeConfFile(t *testing.T, path string, props ...hadoopconf.Property) {
	t.Helper()
	var buf bytes.Buffer
	if err := hadoopconf.Write(&buf, props); err != nil {
		t.Fatal(err)
	}
	// Not renamed into place: the cluster links this very file, and an
	// edit in place is what a user's editor may do.
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// queuesOf is the capacity-scheduler.xml of the given leaf queues under
// root, sharing its capacity.
func queuesOf(names ...string) []hadoopconf.Property {
	const cs = "yarn.scheduler.capacity.root."
	props := []hadoopconf.Property{{Name: cs + "queues", Value: strings.Join(names, ",")}}
	for i, n := range names {
		capacity := 100 / len(names)
		if i == 0 {
			capacity += 100 % len(names)
		}
		props = append(props,
			hadoopconf.Property{Name: cs + n + ".capacity", Value: fmt.Sprint(capacity)},
			hadoopconf.Property{Name: cs + n + ".acl_submit_applications", Value: "*"})
	}
	return props
}

// rmQueues is every queue path the RM at addr reports under root.
func rmQueues(t *testing.T, addr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := ipc.Dial(ctx, addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var resp yarnpb.GetQueueInfoResponseProto
	req := &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String("root"), IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(true)}
	if err := c.Call(ctx, "getQueueInfo", req, &resp); err != nil {
		t.Fatal(err)
	}
	paths := cli.QueuePaths(resp.GetQueueInfo())
	slices.Sort(paths)
	return paths
}

func TestConfDirQueuesAreTheRMsAfterUpAndAfterAnEditAndRefreshQueues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local")
	confDir := t.TempDir()
	writeConfFile(t, filepath.Join(confDir, "capacity-scheduler.xml"), queuesOf("alpha", "beta")...)
	writeConfFile(t, filepath.Join(confDir, "yarn-site.xml"),
		hadoopconf.Property{Name: "yarn.resourcemanager.max-completed-applications", Value: "77"})
	writeConfFile(t, filepath.Join(confDir, "mapred-site.xml"),
		hadoopconf.Property{Name: "mapreduce.framework.name", Value: "yarn"})

	run := knitLocal(t, dir)
	knit := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("knit local %v: %v\n%s", args, err, out)
		}
		return out
	}
	knit("up", "--nodes", "1", "--conf-dir", confDir)
	settings, err := localcluster.RMSettings(localcluster.HadoopConfDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rmQueues(t, settings.Address), []string{"root", "root.alpha", "root.beta"}; !slices.Equal(got, want) {
		t.Fatalf("queues after up --conf-dir: %v, want %v", got, want)
	}
	// The other files reach the client folder the nodes read too.
	if _, err := os.Stat(filepath.Join(localcluster.HadoopConfDir(dir), "mapred-site.xml")); err != nil {
		t.Errorf("mapred-site.xml of the conf dir: %v", err)
	}

	// An edit in the conf dir, then `knit rmadmin -refreshQueues`. (A queue
	// goes only once stopped, as in YARN: the edit adds one.)
	writeConfFile(t, filepath.Join(confDir, "capacity-scheduler.xml"), queuesOf("alpha", "beta", "gamma")...)
	cmd := exec.Command(filepath.Join(binDir, "knit"), "rmadmin", "-refreshQueues")
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(dir), "HADOOP_USER_NAME="+os.Getenv("USER"))
	refreshed, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("knit rmadmin -refreshQueues: %v\n%s", err, refreshed)
	}
	// It says what was read: the file, and the queues the RM now has.
	for _, want := range []string{"capacity-scheduler.xml in this client's configuration: " + filepath.Join(localcluster.HadoopConfDir(dir), "capacity-scheduler.xml"),
		"the ResourceManager's queues: root, root.alpha, root.beta, root.gamma"} {
		if !strings.Contains(string(refreshed), want) {
			t.Errorf("knit rmadmin -refreshQueues printed\n%s\nwithout %q", refreshed, want)
		}
	}
	if got, want := rmQueues(t, settings.Address), []string{"root", "root.alpha", "root.beta", "root.gamma"}; !slices.Equal(got, want) {
		t.Errorf("queues after an edit and refreshQueues: %v, want %v", got, want)
	}

	// status shows every supervised process.
	out := knit("status")
	for _, name := range []string{"kube-apiserver", "knit-rm", "knit-node-node-1"} {
		if !strings.Contains(out, name+" running") {
			t.Errorf("status does not show %s running:\n%s", name, out)
		}
	}
}
