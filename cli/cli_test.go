package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/rmtest"
)

// testRM is a real ResourceManager serving its client and admin protocols
// on one loopback port, with two queues (default and b), two nodes (one
// running, one unhealthy) and alice as its only admin.
type testRM struct {
	t      *testing.T
	addr   string
	client *ipc.Client
}

func newTestRM(t *testing.T) *testRM {
	t.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	for k, v := range map[string]string{
		"yarn.scheduler.capacity.root.queues":                          "default,b",
		"yarn.scheduler.capacity.root.default.capacity":                "60",
		"yarn.scheduler.capacity.root.b.capacity":                      "40",
		"yarn.scheduler.capacity.root.b.maximum-capacity":              "80",
		"yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
		"yarn.scheduler.capacity.root.b.acl_submit_applications":       "*",
	} {
		c.Set(k, v)
	}
	tree, err := queues.Build(c, queues.Options{AdminACL: acl.Parse("alice")})
	if err != nil {
		t.Fatal(err)
	}
	settings := conf.DefaultRMSettings()
	settings.Address = "127.0.0.1:8032"
	settings.WebappAddress = "rm.example:8088"
	nodes := rmtest.NodeList{
		{Name: "n1", Host: "node1", NMPort: 8041, HTTPAddress: "node1:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_RUNNING,
			CapabilityMB: 8192, CapabilityVcores: 8, UsedMB: 1024, UsedVcores: 1, Containers: 1},
		{Name: "n2", Host: "node2", NMPort: 8041, HTTPAddress: "node2:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_UNHEALTHY,
			CapabilityMB: 8192, CapabilityVcores: 8, HealthReport: "disk full"},
	}
	rmgr, err := rm.New(rm.Config{
		Settings: settings, Queues: tree, Store: rmtest.NewMemoryStore(), IDs: &rmtest.MemoryIDs{ClusterTimestamp: 1700000000000}, Nodes: nodes,
		MaxApplicationPriority: 10, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rmgr.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := rmgr.Register(srv); err != nil {
		t.Fatal(err)
	}
	admin, err := rm.NewAdminService(rmgr, rm.AdminConfig{
		LoadConf: func(context.Context) (*hadoopconf.Configuration, error) { return c, nil },
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(srv); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	e := &testRM{t: t, addr: l.Addr().String()}
	e.client, err = ipc.Dial(context.Background(), e.addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// submit submits an application as YarnClientImpl.submitApplication does and
// returns its id.
func (e *testRM) submit(name, appType, queue string, tags ...string) string {
	e.t.Helper()
	ctx := context.Background()
	rm := yarnrpc.NewApplicationClientProtocolClient(e.client)
	newApp, err := rm.GetNewApplication(ctx, &yarnpb.GetNewApplicationRequestProto{})
	if err != nil {
		e.t.Fatal(err)
	}
	sc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   newApp.GetApplicationId(),
		ApplicationName: proto.String(name),
		ApplicationType: proto.String(appType),
		Queue:           proto.String(queue),
		ApplicationTags: tags,
		AmContainerSpec: &yarnpb.ContainerLaunchContextProto{Command: []string{"sleep 100"}},
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
	}
	if _, err := rm.SubmitApplication(ctx, &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}); err != nil {
		e.t.Fatal(err)
	}
	return fmt.Sprintf("application_1700000000000_%04d", newApp.GetApplicationId().GetId())
}

// run runs one command as alice and returns its exit code, stdout and stderr.
func (e *testRM) run(args ...string) (int, string, string) {
	e.t.Helper()
	return e.runAs("alice", args...)
}

// runAs runs one command as user.
func (e *testRM) runAs(user string, args ...string) (int, string, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Run(ctx, args, &out, &errOut, Config{RMAddress: e.addr, AdminAddress: e.addr, User: user})
	return code, out.String(), errOut.String()
}

// timesRE masks the millisecond times of a status report.
var timesRE = regexp.MustCompile(`(Start-Time|Finish-Time) : \d+`)

func mask(s string) string { return timesRE.ReplaceAllString(s, "$1 : <time>") }

func diff(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("%s: line %d\n got: %q\nwant: %q", what, i+1, gl, wl)
		}
	}
}

func wantCode(t *testing.T, what string, got, want int) {
	t.Helper()
	if got != want {
		t.Errorf("%s: exit code %d, want %d", what, got, want)
	}
}
