package rm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knitdev/knit/rgs/nodes"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/acl"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/apps"
	"github.com/knitdev/knit/rm/conf"
	"github.com/knitdev/knit/rm/queues"
	"github.com/knitdev/knit/rm/tokens"
)

// memStore is an AppStore in memory whose next writes can be refused, as
// the store refuses a write for good (its retries are its own). (Other packages' tests use
// rmtest.MemoryStore, which this package's tests cannot import.)
type memStore struct {
	mu       sync.Mutex
	apps     map[string]StoredApp
	failPuts int
	// puts counts every write asked of it.
	puts int
	// fenced refuses every write from now on, as a store whose RM lost
	// its leadership does; fencedPuts counts the writes it refused.
	fenced     bool
	fencedPuts int
	// held, while set, keeps every write waiting until it is closed, and
	// each write says on entered that it has begun (holdPuts).
	held    chan struct{}
	entered chan string
}

func newMemStore() *memStore { return &memStore{apps: map[string]StoredApp{}} }

func (s *memStore) Put(_ context.Context, id, state, user, queue string, finish time.Time, data []byte) error {
	s.mu.Lock()
	held, entered := s.held, s.entered
	s.mu.Unlock()
	if held != nil {
		entered <- id
		<-held
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	if s.fenced {
		s.fencedPuts++
		return fmt.Errorf("put %s: %w", id, ErrFenced)
	}
	if s.failPuts > 0 {
		s.failPuts--
		return errors.New("yarnapplications.knit.io is invalid")
	}
	s.apps[id] = StoredApp{ID: id, State: state, User: user, Queue: queue, FinishTime: finish, Data: slices.Clone(data)}
	return nil
}

func (s *memStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.apps, id)
	return nil
}

func (s *memStore) List(context.Context) ([]StoredApp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.apps)), nil
}

// Get returns the record of application id, if there is one.
func (s *memStore) Get(id string) (StoredApp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[id]
	return a, ok
}

// testIDs is an IDSource counting from 1 under a fixed cluster timestamp;
// its counter outlives the RMs that share it, as a persisted one does.
type testIDs struct {
	clusterTimestamp int64
	seq              atomic.Int32
}

func (m *testIDs) Next(context.Context) (int64, int32, error) {
	return m.clusterTimestamp, m.seq.Add(1), nil
}

// fixedNodes is a NodeLister with a fixed set of nodes.
type fixedNodes []NodeInfo

func (n fixedNodes) Nodes(context.Context) ([]NodeInfo, error) { return n, nil }

func (n fixedNodes) Census(context.Context) (NodeCensus, error) { return nodes.CensusOf(n), nil }

// fence makes every later write fail as fenced; it returns how many
// writes it has refused so far.
func (s *memStore) fence() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fenced = true
	return s.fencedPuts
}

// holdPuts keeps the writes from now on in flight, as a slow API server
// would, until release is called; each tells entered when it begins.
func (s *memStore) holdPuts() (entered <-chan string, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ch := make(chan struct{}), make(chan string, 16)
	s.held, s.entered = held, ch
	return ch, func() {
		s.mu.Lock()
		s.held, s.entered = nil, nil
		s.mu.Unlock()
		close(held)
	}
}

// putCount is how many writes were asked of the store.
func (s *memStore) putCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

// failNextPuts makes the next n writes fail for good.
func (s *memStore) failNextPuts(n int) {
	s.mu.Lock()
	s.failPuts = n
	s.mu.Unlock()
}

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is one RM serving on a loopback port.
type env struct {
	t     *testing.T
	rm    *ResourceManager
	addr  string
	store *memStore
	ids   *testIDs
	clock *testClock
	cfg   Config
}

// baseQueues is root with "default" and "b", b's ACLs left to the test.
// gpuQueues are baseQueues with root.b given all of the gpu partition.
func gpuQueues() map[string]string {
	return baseQueues(map[string]string{
		"yarn.scheduler.capacity.root.b.accessible-node-labels":              "gpu",
		"yarn.scheduler.capacity.root.b.accessible-node-labels.gpu.capacity": "100",
	})
}

// gpuNodes are a running default node of 8 GiB and a running gpu node of
// 16 GiB, then extra.
func gpuNodes(extra ...NodeInfo) fixedNodes {
	running := yarnpb.NodeStateProto_NS_RUNNING
	return append(fixedNodes{
		{Name: "n1", State: running, CapabilityMB: 8192, CapabilityVcores: 8},
		{Name: "g1", State: running, CapabilityMB: 16384, CapabilityVcores: 16, Partition: "gpu"},
	}, extra...)
}

func baseQueues(extra map[string]string) map[string]string {
	props := map[string]string{
		"yarn.scheduler.capacity.root.queues":                          "default,b",
		"yarn.scheduler.capacity.root.default.capacity":                "50",
		"yarn.scheduler.capacity.root.b.capacity":                      "50",
		"yarn.scheduler.capacity.root.acl_submit_applications":         " ",
		"yarn.scheduler.capacity.root.acl_administer_queue":            " ",
		"yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
		"yarn.scheduler.capacity.root.b.acl_submit_applications":       "*",
	}
	for k, v := range extra {
		props[k] = v
	}
	return props
}

type envOptions struct {
	queues    map[string]string
	aclEnable bool
	adminACL  string
	maxDone   int
	store     *memStore
	ids       *testIDs
	clock     *testClock
	nodes     NodeLister
	scheduler Scheduler
	launcher  ContainerLauncher
	tracer    AppTracer
	tokens    *tokens.Manager
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	c := hadoopconf.New(hadoopconf.Options{})
	qp := o.queues
	if qp == nil {
		qp = baseQueues(nil)
	}
	for k, v := range qp {
		c.Set(k, v)
	}
	admin := o.adminACL
	if admin == "" {
		admin = " "
	}
	tree, err := queues.Build(c, queues.Options{ACLsEnabled: o.aclEnable, AdminACL: acl.Parse(admin)})
	if err != nil {
		t.Fatal(err)
	}
	settings := conf.DefaultRMSettings()
	settings.Address = "127.0.0.1:8032"
	settings.WebappAddress = "rm.example:8088"
	settings.ACLEnable = o.aclEnable
	if o.maxDone != 0 {
		settings.MaxCompletedApplications = o.maxDone
	}
	if o.store == nil {
		o.store = newMemStore()
	}
	if o.ids == nil {
		o.ids = &testIDs{clusterTimestamp: 1700000000000}
	}
	if o.clock == nil {
		o.clock = &testClock{now: time.UnixMilli(1700000100000)}
	}
	if o.nodes == nil {
		o.nodes = fixedNodes{
			{Name: "n1", Host: "node1", NMPort: 8041, HTTPAddress: "node1:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_RUNNING,
				CapabilityMB: 8192, CapabilityVcores: 8, UsedMB: 1024, UsedVcores: 1, Containers: 1},
			{Name: "n2", Host: "node2", NMPort: 8041, HTTPAddress: "node2:8042", Rack: "/default-rack", State: yarnpb.NodeStateProto_NS_UNHEALTHY,
				CapabilityMB: 8192, CapabilityVcores: 8, HealthReport: "disk full"},
		}
	}
	cfg := Config{
		Settings: settings, Queues: tree, Store: o.store, IDs: o.ids, Nodes: o.nodes, Scheduler: o.scheduler,
		Launcher: o.launcher, Clock: o.clock.Now, Logger: slog.New(slog.DiscardHandler), Tracer: o.tracer, Tokens: o.tokens,
	}
	rm, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rm.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := rm.Register(srv); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &env{t: t, rm: rm, addr: l.Addr().String(), store: o.store, ids: o.ids, clock: o.clock, cfg: cfg}
}

// client dials the RM as user, as a YarnClient does.
func (e *env) client(user string) *ipc.Client {
	e.t.Helper()
	c, err := ipc.Dial(context.Background(), e.addr, ipc.ClientConfig{Protocol: yarnrpc.ApplicationClientProtocolName, User: user})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func call[Resp proto.Message](t *testing.T, c *ipc.Client, method string, req proto.Message, resp Resp) (Resp, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Call(ctx, method, req, resp)
	return resp, err
}

func mustCall[Resp proto.Message](t *testing.T, c *ipc.Client, method string, req proto.Message, resp Resp) Resp {
	t.Helper()
	r, err := call(t, c, method, req, resp)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// wantRemote checks the exception class and, when msg is not empty, the
// message.
func wantRemote(t *testing.T, err error, class yarnerr.Class, msg string) {
	t.Helper()
	e, ok := yarnerr.Find(err)
	if !ok {
		t.Fatalf("error = %v, want %s", err, class)
	}
	if e.Class != class {
		t.Errorf("class = %s, want %s (message %q)", e.Class, class, e.Message)
	}
	if msg != "" && e.Message != msg {
		t.Errorf("message = %q\nwant      %q", e.Message, msg)
	}
}

type subOpts struct {
	queue    string
	name     string
	appType  string
	tags     []string
	memory   int64
	viewACL  *string
	modACL   *string
	priority *int32
	// nodeLabel is the application's node label expression.
	nodeLabel string
}

// submit gets a new id and submits an application with it, as
// YarnClientImpl.submitApplication does.
func (e *env) submit(c *ipc.Client, o subOpts) (*yarnpb.ApplicationIdProto, error) {
	e.t.Helper()
	newApp := mustCall(e.t, c, "getNewApplication", &yarnpb.GetNewApplicationRequestProto{}, &yarnpb.GetNewApplicationResponseProto{})
	id := newApp.GetApplicationId()
	if o.memory == 0 {
		o.memory = 1024
	}
	spec := &yarnpb.ContainerLaunchContextProto{Command: []string{"sleep 100"}}
	if o.viewACL != nil {
		spec.Application_ACLs = append(spec.Application_ACLs, &yarnpb.ApplicationACLMapProto{AccessType: yarnpb.ApplicationAccessTypeProto_APPACCESS_VIEW_APP.Enum(), Acl: o.viewACL})
	}
	if o.modACL != nil {
		spec.Application_ACLs = append(spec.Application_ACLs, &yarnpb.ApplicationACLMapProto{AccessType: yarnpb.ApplicationAccessTypeProto_APPACCESS_MODIFY_APP.Enum(), Acl: o.modACL})
	}
	sc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:   id,
		AmContainerSpec: spec,
		Resource:        &yarnpb.ResourceProto{Memory: proto.Int64(o.memory), VirtualCores: proto.Int32(1)},
		ApplicationTags: o.tags,
	}
	if o.queue != "" {
		sc.Queue = proto.String(o.queue)
	}
	if o.nodeLabel != "" {
		sc.NodeLabelExpression = proto.String(o.nodeLabel)
	}
	if o.name != "" {
		sc.ApplicationName = proto.String(o.name)
	}
	if o.appType != "" {
		sc.ApplicationType = proto.String(o.appType)
	}
	if o.priority != nil {
		sc.Priority = &yarnpb.PriorityProto{Priority: o.priority}
	}
	_, err := call(e.t, c, "submitApplication", &yarnpb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}, &yarnpb.SubmitApplicationResponseProto{})
	return id, err
}

func (e *env) mustSubmit(c *ipc.Client, o subOpts) *yarnpb.ApplicationIdProto {
	e.t.Helper()
	id, err := e.submit(c, o)
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return id
}

func (e *env) report(c *ipc.Client, id *yarnpb.ApplicationIdProto) *yarnpb.ApplicationReportProto {
	e.t.Helper()
	return mustCall(e.t, c, "getApplicationReport", &yarnpb.GetApplicationReportRequestProto{ApplicationId: id},
		&yarnpb.GetApplicationReportResponseProto{}).GetApplicationReport()
}

func appIDOf(t *testing.T, p *yarnpb.ApplicationIdProto) apps.ApplicationID {
	t.Helper()
	id, err := yarnid.ApplicationIDFromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
