package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
	"github.com/knitdev/knit/rm/tokens"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRM is a sub-cluster RM behind a real Hadoop RPC server: it keeps the
// applications submitted to it, as far as the Router's calls need.
type fakeRM struct {
	id   string
	ts   int64
	addr string

	mu    sync.Mutex
	next  int32
	apps  map[string]*yarnpb.ApplicationReportProto
	users []string
	// realUsers are the callers' real users, one for each of users.
	realUsers  []string
	failSubmit bool
	// reservations are those submitted, by id, and updates the number of
	// updates each had; noReservations refuses every reservation call, as
	// a knit-rm (a YARN RM without a reservation system) does.
	reservations   map[string]*yarnpb.ReservationIdProto
	updates        map[string]int
	noReservations bool
}

// errNoReservationSystem is a knit-rm's answer to a reservation call.
var errNoReservationSystem = yarnerr.YarnException.New("Reservation is not enabled. Please enable & try again")

func startRM(t testing.TB, id string, ts int64) *fakeRM {
	t.Helper()
	rm := &fakeRM{id: id, ts: ts, apps: map[string]*yarnpb.ApplicationReportProto{}, reservations: map[string]*yarnpb.ReservationIdProto{}, updates: map[string]int{}}
	rm.addr = ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ApplicationClientProtocolName, yarnrpc.ApplicationClientProtocolFuncs{
		GetNewApplication: func(ctx context.Context, _ *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			rm.seen(ctx)
			rm.next++
			return &yarnpb.GetNewApplicationResponseProto{ApplicationId: yarnid.ApplicationID{ClusterTimestamp: rm.ts, ID: rm.next}.Proto(),
				MaximumCapability: yarnpb.NewResource(8192, 4)}, nil
		},
		SubmitApplication: func(ctx context.Context, req *yarnpb.SubmitApplicationRequestProto) (*yarnpb.SubmitApplicationResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			user := rm.seen(ctx)
			if rm.failSubmit {
				return nil, errors.New("sub-cluster broken")
			}
			asc := req.GetApplicationSubmissionContext()
			rm.apps[appKey(asc.GetApplicationId())] = &yarnpb.ApplicationReportProto{
				ApplicationId: asc.GetApplicationId(), User: proto.String(user), Queue: proto.String("root." + asc.GetQueue()),
				Name: proto.String(asc.GetApplicationName()), Host: proto.String("N/A"),
				YarnApplicationState: yarnpb.YarnApplicationStateProto_ACCEPTED.Enum(),
				AppResource_Usage:    &yarnpb.ApplicationResourceUsageReportProto{NumUsedContainers: proto.Int32(1)},
			}
			return &yarnpb.SubmitApplicationResponseProto{}, nil
		},
		GetApplicationReport: func(ctx context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			rm.seen(ctx)
			app, ok := rm.apps[appKey(req.GetApplicationId())]
			if !ok {
				return nil, yarnerr.ApplicationNotFound.Errorf("Application with id '%s' doesn't exist in RM.", appKey(req.GetApplicationId()))
			}
			return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: proto.Clone(app).(*yarnpb.ApplicationReportProto)}, nil
		},
		ForceKillApplication: func(ctx context.Context, req *yarnpb.KillApplicationRequestProto) (*yarnpb.KillApplicationResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			rm.seen(ctx)
			app, ok := rm.apps[appKey(req.GetApplicationId())]
			if !ok {
				return nil, yarnerr.ApplicationNotFound.New("no such application")
			}
			app.YarnApplicationState = yarnpb.YarnApplicationStateProto_KILLED.Enum()
			return &yarnpb.KillApplicationResponseProto{IsKillCompleted: proto.Bool(true)}, nil
		},
		GetApplications: func(ctx context.Context, _ *yarnpb.GetApplicationsRequestProto) (*yarnpb.GetApplicationsResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			rm.seen(ctx)
			out := &yarnpb.GetApplicationsResponseProto{}
			for _, app := range rm.apps {
				out.Applications = append(out.Applications, proto.Clone(app).(*yarnpb.ApplicationReportProto))
			}
			return out, nil
		},
		GetClusterMetrics: func(context.Context, *yarnpb.GetClusterMetricsRequestProto) (*yarnpb.GetClusterMetricsResponseProto, error) {
			return &yarnpb.GetClusterMetricsResponseProto{ClusterMetrics: &yarnpb.YarnClusterMetricsProto{NumNodeManagers: proto.Int32(2), NumActiveNms: proto.Int32(2), NumLostNms: proto.Int32(1)}}, nil
		},
		GetClusterNodes: func(context.Context, *yarnpb.GetClusterNodesRequestProto) (*yarnpb.GetClusterNodesResponseProto, error) {
			return &yarnpb.GetClusterNodesResponseProto{NodeReports: []*yarnpb.NodeReportProto{{NodeId: &yarnpb.NodeIdProto{Host: proto.String(id + "-node"), Port: proto.Int32(8041)}}}}, nil
		},
		GetQueueInfo: func(_ context.Context, req *yarnpb.GetQueueInfoRequestProto) (*yarnpb.GetQueueInfoResponseProto, error) {
			return &yarnpb.GetQueueInfoResponseProto{QueueInfo: &yarnpb.QueueInfoProto{QueueName: proto.String(req.GetQueueName()), Capacity: proto.Float32(0.5),
				MaximumCapacity: proto.Float32(1), ChildQueues: []*yarnpb.QueueInfoProto{{QueueName: proto.String(id + "-child")}}}}, nil
		},
		GetClusterNodeLabels: func(context.Context, *yarnpb.GetClusterNodeLabelsRequestProto) (*yarnpb.GetClusterNodeLabelsResponseProto, error) {
			return &yarnpb.GetClusterNodeLabelsResponseProto{NodeLabels: []*yarnpb.NodeLabelProto{{Name: proto.String("gpu")}, {Name: proto.String(id)}}}, nil
		},
		GetLabelsToNodes: func(context.Context, *yarnpb.GetLabelsToNodesRequestProto) (*yarnpb.GetLabelsToNodesResponseProto, error) {
			return &yarnpb.GetLabelsToNodesResponseProto{LabelsToNodes: []*yarnpb.LabelsToNodeIdsProto{{NodeLabels: proto.String("gpu"),
				NodeId: []*yarnpb.NodeIdProto{{Host: proto.String(id + "-node"), Port: proto.Int32(8041)}}}}}, nil
		},
		GetNodeToLabels: func(context.Context, *yarnpb.GetNodesToLabelsRequestProto) (*yarnpb.GetNodesToLabelsResponseProto, error) {
			return &yarnpb.GetNodesToLabelsResponseProto{NodeToLabels: []*yarnpb.NodeIdToLabelsProto{{NodeId: &yarnpb.NodeIdProto{Host: proto.String(id + "-node"),
				Port: proto.Int32(8041)}, NodeLabels: []string{"gpu"}}}}, nil
		},
		GetClusterNodeAttributes: func(context.Context, *yarnpb.GetClusterNodeAttributesRequestProto) (*yarnpb.GetClusterNodeAttributesResponseProto, error) {
			return &yarnpb.GetClusterNodeAttributesResponseProto{NodeAttributes: []*yarnpb.NodeAttributeInfoProto{{AttributeKey: zoneKey(),
				AttributeType: yarnpb.NodeAttributeTypeProto_STRING.Enum()}}}, nil
		},
		GetAttributesToNodes: func(context.Context, *yarnpb.GetAttributesToNodesRequestProto) (*yarnpb.GetAttributesToNodesResponseProto, error) {
			return &yarnpb.GetAttributesToNodesResponseProto{AttributesToNodes: []*yarnpb.AttributeToNodesProto{{NodeAttribute: zoneKey(),
				NodeValueMap: []*yarnpb.NodeToAttributeValueProto{{Hostname: proto.String(id + "-node"), AttributeValue: proto.String(id)}}}}}, nil
		},
		GetNodesToAttributes: func(context.Context, *yarnpb.GetNodesToAttributesRequestProto) (*yarnpb.GetNodesToAttributesResponseProto, error) {
			return &yarnpb.GetNodesToAttributesResponseProto{NodesToAttributes: []*yarnpb.NodeToAttributesProto{{Node: proto.String(id + "-node"),
				NodeAttributes: []*yarnpb.NodeAttributeProto{{AttributeKey: zoneKey(), AttributeValue: proto.String(id)}}}}}, nil
		},
		GetQueueUserAcls: func(context.Context, *yarnpb.GetQueueUserAclsInfoRequestProto) (*yarnpb.GetQueueUserAclsInfoResponseProto, error) {
			return &yarnpb.GetQueueUserAclsInfoResponseProto{QueueUserAcls: []*yarnpb.QueueUserACLInfoProto{{QueueName: proto.String("default"),
				UserAcls: []yarnpb.QueueACLProto{yarnpb.QueueACLProto_QACL_SUBMIT_APPLICATIONS}}}}, nil
		},
		// As a Knit RM, or a YARN RM without resource profiles.
		GetResourceProfiles: func(context.Context, *yarnpb.GetAllResourceProfilesRequestProto) (*yarnpb.GetAllResourceProfilesResponseProto, error) {
			return nil, yarnerr.YARNFeatureNotEnabled.New("Resource profile is not enabled, please enable resource profile feature before using its functions. (by setting yarn.resourcemanager.resource-profiles.enabled to true)")
		},
		GetNewReservation: func(context.Context, *yarnpb.GetNewReservationRequestProto) (*yarnpb.GetNewReservationResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if rm.noReservations {
				return nil, errNoReservationSystem
			}
			rm.next++
			return &yarnpb.GetNewReservationResponseProto{ReservationId: &yarnpb.ReservationIdProto{ClusterTimestamp: proto.Int64(rm.ts), Id: proto.Int64(int64(rm.next))}}, nil
		},
		SubmitReservation: func(_ context.Context, req *yarnpb.ReservationSubmissionRequestProto) (*yarnpb.ReservationSubmissionResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if rm.noReservations {
				return nil, errNoReservationSystem
			}
			rm.reservations[reservationKey(req.GetReservationId())] = req.GetReservationId()
			return &yarnpb.ReservationSubmissionResponseProto{}, nil
		},
		UpdateReservation: func(_ context.Context, req *yarnpb.ReservationUpdateRequestProto) (*yarnpb.ReservationUpdateResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if rm.noReservations {
				return nil, errNoReservationSystem
			}
			k := reservationKey(req.GetReservationId())
			if _, ok := rm.reservations[k]; !ok {
				return nil, yarnerr.YarnException.Errorf("The specified reservation with ID: %s is unknown. Please try again with a valid reservation.", k)
			}
			rm.updates[k]++
			return &yarnpb.ReservationUpdateResponseProto{}, nil
		},
		DeleteReservation: func(_ context.Context, req *yarnpb.ReservationDeleteRequestProto) (*yarnpb.ReservationDeleteResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if rm.noReservations {
				return nil, errNoReservationSystem
			}
			delete(rm.reservations, reservationKey(req.GetReservationId()))
			return &yarnpb.ReservationDeleteResponseProto{}, nil
		},
		ListReservations: func(context.Context, *yarnpb.ReservationListRequestProto) (*yarnpb.ReservationListResponseProto, error) {
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if rm.noReservations {
				return nil, errNoReservationSystem
			}
			out := &yarnpb.ReservationListResponseProto{}
			for _, k := range slices.Sorted(maps.Keys(rm.reservations)) {
				out.Reservations = append(out.Reservations, &yarnpb.ReservationAllocationStateProto{ReservationId: rm.reservations[k]})
			}
			return out, nil
		},
		GetResourceTypeInfo: func(context.Context, *yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
			return &yarnpb.GetAllResourceTypeInfoResponseProto{ResourceTypeInfo: []*yarnpb.ResourceTypeInfoProto{{Name: proto.String("memory-mb"), Units: proto.String("Mi")}, {Name: proto.String("vcores")}}}, nil
		},
	}.Methods()...)
	return rm
}

// zoneKey is the one node attribute the fake RMs' nodes carry.
func zoneKey() *yarnpb.NodeAttributeKeyProto {
	return &yarnpb.NodeAttributeKeyProto{AttributeName: proto.String("zone")}
}

// seen notes the caller's user; under mu.
func (rm *fakeRM) seen(ctx context.Context) string {
	c, _ := ipc.CallerFrom(ctx)
	rm.users = append(rm.users, c.User)
	rm.realUsers = append(rm.realUsers, c.RealUser)
	return c.User
}

func (rm *fakeRM) has(app string) bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	_, ok := rm.apps[app]
	return ok
}

func (rm *fakeRM) info() store.SubClusterInfo {
	return store.SubClusterInfo{ID: rm.id, ClientRMServiceAddress: rm.addr, AMRMServiceAddress: rm.addr, RMAdminServiceAddress: rm.addr,
		RMWebServiceAddress: rm.addr, State: store.StateNew, LastStartTime: time.UnixMilli(rm.ts)}
}

// join registers the sub-clusters running in s.
func join(t testing.TB, s store.StateStore, rms ...*fakeRM) {
	t.Helper()
	for _, rm := range rms {
		if err := s.RegisterSubCluster(t.Context(), rm.info()); err != nil {
			t.Fatal(err)
		}
		if err := s.SubClusterHeartbeat(t.Context(), rm.id, store.StateRunning, "{}"); err != nil {
			t.Fatal(err)
		}
	}
}

// seqRand draws the given ints and floats in turn, then zeros.
type seqRand struct {
	mu     sync.Mutex
	ints   []int
	floats []float64
}

func (s *seqRand) IntN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ints) == 0 {
		return 0
	}
	v := s.ints[0]
	s.ints = s.ints[1:]
	return v % n
}

func (s *seqRand) Float64() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.floats) == 0 {
		return 0
	}
	v := s.floats[0]
	s.floats = s.floats[1:]
	return v
}

type routerOptions struct {
	rand   Randomness
	policy store.PolicyConfiguration
	// cache, if set, is the Router's store, in front of the test's.
	cache *store.Cache
	// machines is the Router's machine list.
	machines *federation.MachineList
	// tokens, if set, is the Router's delegation token secret manager,
	// whose tokens its port also takes for authentication.
	tokens *tokens.Manager
	// ids, if set, lets the Router name applications itself, its
	// capabilities kept capabilityTTL by now.
	ids           TimestampPicker
	capabilityTTL time.Duration
	now           func() time.Time
}

// testTokenService is the service of the tokens test Routers issue.
const testTokenService = "10.0.0.8:8050"

// serveRouter serves a Router over s (through a cache that keeps nothing
// unless the test gives its own, so that the tests' writes show at once)
// on loopback and returns its address and a Knit client of it calling as
// alice.
func serveRouter(t testing.TB, s store.StateStore, o routerOptions) (string, *client.RMClient) {
	t.Helper()
	if o.rand == nil {
		o.rand = &seqRand{}
	}
	if o.cache == nil {
		o.cache = store.NewCache(s, 0, nil)
	}
	r, err := New(Config{Store: o.cache, DefaultPolicy: o.policy, SubmitRetry: 3, Rand: o.rand, Machines: o.machines, Tokens: o.tokens, TokenService: testTokenService,
		IDs: o.ids, CapabilityTTL: o.capabilityTTL, Now: o.now,
		ConnectBackOff: func() backoff.BackOff { return &backoff.StopBackOff{} },
		Logger:         slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ipc.Config{Simple: true}
	if o.tokens != nil {
		cfg.Tokens = o.tokens.Delegation().SecretLookup()
	}
	addr := ipctest.Serve(t, cfg, yarnrpc.ApplicationClientProtocolName, r.Methods()...)
	c, err := client.NewRMClient(addr, client.RMConfig{User: "alice", PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		r.Close()
	})
	return addr, c
}

func submission(id *yarnpb.ApplicationIdProto, queue string) *yarnpb.ApplicationSubmissionContextProto {
	return &yarnpb.ApplicationSubmissionContextProto{ApplicationId: id, ApplicationName: proto.String("job"), Queue: proto.String(queue),
		UnmanagedAm: proto.Bool(true), AmContainerSpec: &yarnpb.ContainerLaunchContextProto{}, Resource: yarnpb.NewResource(1024, 1)}
}

func weighted(weights map[string]string) store.PolicyConfiguration {
	entries := ""
	for id, w := range weights {
		if entries != "" {
			entries += ","
		}
		entries += fmt.Sprintf(`{"key":{"id":%q},"value":%q}`, id, w)
	}
	return store.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: federation.WeightedHomePolicyManager,
		Params: []byte(`{"routerPolicyWeights":{"entry":[` + entries + `]},"amrmPolicyWeights":{"entry":[]},"headroomAlpha":"1.0"}`)}
}
