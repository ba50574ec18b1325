package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

const (
	// grpcService is the service of the same protocol in
	// applicationclient_protocol.proto, the name a gRPC stub would use.
	grpcService = "knit.hadoop.yarn.ApplicationClientProtocolService"

	// benchIdle keeps both ends of an idle connection open between runs, so
	// that no run pays for a reconnect (the defaults are 10s and 20s).
	benchIdle = 10 * time.Minute
)

// workload is one RPC both engines serve: the same method, request and
// response messages.
type workload struct {
	name    string
	method  string
	request func(conn int) proto.Message // made once per connection, then reused
	newResp func() proto.Message
	check   func(proto.Message) error // sanity check of the first answer
}

// getNewApplication is the small call: an empty request, an application id
// and a maximum capability back (about 20 bytes of body each way counting
// the response).
var getNewApplication = workload{
	name:    "getNewApplication",
	method:  "getNewApplication",
	request: func(int) proto.Message { return &yarnpb.GetNewApplicationRequestProto{} },
	newResp: func() proto.Message { return new(yarnpb.GetNewApplicationResponseProto) },
	check: func(m proto.Message) error {
		r := m.(*yarnpb.GetNewApplicationResponseProto)
		if r.GetApplicationId().GetId() <= 0 || r.GetMaximumCapability().GetMemory() != 8192 {
			return fmt.Errorf("unexpected answer %v", r)
		}
		return nil
	},
}

// getApplicationReport is a realistic read: an application id in, a report
// of a running Spark application out (about 600 bytes).
var getApplicationReport = workload{
	name:   "getApplicationReport",
	method: "getApplicationReport",
	request: func(conn int) proto.Message {
		return &yarnpb.GetApplicationReportRequestProto{ApplicationId: &yarnpb.ApplicationIdProto{
			Id: proto.Int32(int32(conn + 1)), ClusterTimestamp: proto.Int64(clusterTimestamp)}}
	},
	newResp: func() proto.Message { return new(yarnpb.GetApplicationReportResponseProto) },
	check: func(m proto.Message) error {
		r := m.(*yarnpb.GetApplicationReportResponseProto).GetApplicationReport()
		if r.GetApplicationId().GetId() <= 0 || r.GetUser() != "alice" {
			return fmt.Errorf("unexpected answer %v", r)
		}
		return nil
	},
}

const clusterTimestamp = 1767225600000

// appService answers both workloads; each engine gets its own.
type appService struct {
	nextID atomic.Int32
}

func (s *appService) getNewApplication(context.Context, *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error) {
	return &yarnpb.GetNewApplicationResponseProto{
		ApplicationId:     &yarnpb.ApplicationIdProto{Id: proto.Int32(s.nextID.Add(1)), ClusterTimestamp: proto.Int64(clusterTimestamp)},
		MaximumCapability: &yarnpb.ResourceProto{Memory: proto.Int64(8192), VirtualCores: proto.Int32(4)},
	}, nil
}

func (s *appService) getApplicationReport(_ context.Context, req *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error) {
	id := req.GetApplicationId()
	appID := fmt.Sprintf("application_%d_%04d", id.GetClusterTimestamp(), id.GetId())
	res := func(mb int64, vc int32) *yarnpb.ResourceProto {
		return &yarnpb.ResourceProto{Memory: proto.Int64(mb), VirtualCores: proto.Int32(vc)}
	}
	return &yarnpb.GetApplicationReportResponseProto{ApplicationReport: &yarnpb.ApplicationReportProto{
		ApplicationId:          id,
		User:                   proto.String("alice"),
		Queue:                  proto.String("root.analytics.adhoc"),
		Name:                   proto.String("Spark shell: nightly sessionization " + appID),
		Host:                   proto.String("knit-task-" + appID + "-am.analytics.svc.cluster.local"),
		RpcPort:                proto.Int32(41871),
		YarnApplicationState:   yarnpb.YarnApplicationStateProto_RUNNING.Enum(),
		TrackingUrl:            proto.String("http://knit-rm.knit-system.svc:8088/proxy/" + appID + "/"),
		Diagnostics:            proto.String(""),
		StartTime:              proto.Int64(clusterTimestamp + 61_000),
		FinishTime:             proto.Int64(0),
		FinalApplicationStatus: yarnpb.FinalApplicationStatusProto_APP_UNDEFINED.Enum(),
		AppResource_Usage: &yarnpb.ApplicationResourceUsageReportProto{
			NumUsedContainers:      proto.Int32(9),
			NumReservedContainers:  proto.Int32(0),
			UsedResources:          res(9*4096+1024, 9*2+1),
			ReservedResources:      res(0, 0),
			NeededResources:        res(9*4096+1024, 9*2+1),
			MemorySeconds:          proto.Int64(118_394_880),
			VcoreSeconds:           proto.Int64(57_810),
			QueueUsagePercentage:   proto.Float32(12.5),
			ClusterUsagePercentage: proto.Float32(3.1),
		},
		OriginalTrackingUrl:         proto.String("http://10.0.3.17:4040"),
		CurrentApplicationAttemptId: &yarnpb.ApplicationAttemptIdProto{ApplicationId: id, AttemptId: proto.Int32(1)},
		Progress:                    proto.Float32(0.42),
		ApplicationType:             proto.String("SPARK"),
		ApplicationTags:             []string{"team:analytics", "job:sessionization"},
		LogAggregationStatus:        yarnpb.LogAggregationStatusProto_LOG_NOT_START.Enum(),
		Priority:                    &yarnpb.PriorityProto{Priority: proto.Int32(0)},
		LaunchTime:                  proto.Int64(clusterTimestamp + 62_000),
		SubmitTime:                  proto.Int64(clusterTimestamp + 60_000),
		RmClusterId:                 proto.String("knit"),
		ClientToAmToken: &commonpb.TokenProto{
			Identifier: []byte("\x0a\x0c\x08\x01\x10\x80\xb0\xc3\xa8\xbb\x33\x12\x05alice"),
			Password:   []byte("0123456789abcdef0123"),
			Kind:       proto.String("YARN_CLIENT_TOKEN"),
			Service:    proto.String(""),
		},
	}}, nil
}

// fixture is a serving engine and its connected clients.
type fixture struct {
	// calls holds one function per connection; each makes one call of the
	// workload on its own connection and is used by one goroutine at a time.
	calls []func(context.Context) error
	close func() error

	// Set by startFixture: what each connection (client and server ends
	// together) holds once set up.
	memPerConn        float64 // bytes of heap and goroutine stacks
	goroutinesPerConn float64
}

// engine starts a server and conns clients, each on its own TCP connection,
// every one already connected and having answered one call.
type engine struct {
	name  string
	start func(ctx context.Context, w workload, conns int) (*fixture, error)
}

var engines = []engine{
	{"hadoop-ipc", startHadoop},
	{"grpc", startGRPC},
}

var quiet = slog.New(slog.DiscardHandler)

func startHadoop(ctx context.Context, w workload, conns int) (_ *fixture, err error) {
	svc := &appService{}
	srv, err := ipc.NewServer(ipc.Config{Simple: true, IdleTimeout: benchIdle, Logger: quiet})
	if err != nil {
		return nil, err
	}
	funcs := yarnrpc.ApplicationClientProtocolFuncs{
		GetNewApplication:    svc.getNewApplication,
		GetApplicationReport: svc.getApplicationReport,
	}
	if err := funcs.Register(srv); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	var clients []*ipc.Client
	fx := &fixture{close: func() error {
		for _, c := range clients {
			_ = c.Close()
		}
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if serr := <-served; !errors.Is(serr, ipc.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}}
	defer func() {
		if err != nil {
			_ = fx.close()
		}
	}()
	for i := range conns {
		c, err := ipc.Dial(ctx, l.Addr().String(), ipc.ClientConfig{
			Protocol: yarnrpc.ApplicationClientProtocolName, User: "bench", MaxIdleTime: benchIdle, Logger: quiet,
		})
		if err != nil {
			return nil, fmt.Errorf("dial %d: %w", i, err)
		}
		clients = append(clients, c)
		req := w.request(i)
		fx.calls = append(fx.calls, func(ctx context.Context) error {
			return c.Call(ctx, w.method, req, w.newResp())
		})
	}
	return fx, warmUp(ctx, w, fx, func(ctx context.Context, i int, resp proto.Message) error {
		return clients[i].Call(ctx, w.method, w.request(i), resp)
	})
}

// grpcAppService is the HandlerType of the hand-written service description:
// what a generated ApplicationClientProtocolServiceServer would be.
type grpcAppService interface {
	getNewApplication(context.Context, *yarnpb.GetNewApplicationRequestProto) (*yarnpb.GetNewApplicationResponseProto, error)
	getApplicationReport(context.Context, *yarnpb.GetApplicationReportRequestProto) (*yarnpb.GetApplicationReportResponseProto, error)
}

var _ grpcAppService = (*appService)(nil)

// unary is the method handler protoc-gen-go-grpc would generate: decode the
// request with the default proto codec, then call the service, through the
// interceptor if one is installed.
func unary[Req proto.Message, Resp any](method string, fn func(grpcAppService, context.Context, Req) (Resp, error)) grpc.MethodDesc {
	var zero Req
	typ := zero.ProtoReflect().Type()
	return grpc.MethodDesc{
		MethodName: method,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := typ.New().Interface().(Req)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return fn(srv.(grpcAppService), ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + grpcService + "/" + method}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return fn(srv.(grpcAppService), ctx, req.(Req))
			})
		},
	}
}

var grpcServiceDesc = grpc.ServiceDesc{
	ServiceName: grpcService,
	HandlerType: (*grpcAppService)(nil),
	Methods: []grpc.MethodDesc{
		unary("getNewApplication", grpcAppService.getNewApplication),
		unary("getApplicationReport", grpcAppService.getApplicationReport),
	},
	Metadata: "yarnpb/applicationclient_protocol.proto",
}

func startGRPC(ctx context.Context, w workload, conns int) (_ *fixture, err error) {
	srv := grpc.NewServer()
	srv.RegisterService(&grpcServiceDesc, &appService{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	var clients []*grpc.ClientConn
	fx := &fixture{close: func() error {
		for _, c := range clients {
			_ = c.Close()
		}
		srv.Stop()
		return <-served
	}}
	defer func() {
		if err != nil {
			_ = fx.close()
		}
	}()
	fullMethod := "/" + grpcService + "/" + w.method
	for i := range conns {
		c, err := grpc.NewClient("passthrough:///"+l.Addr().String(),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		clients = append(clients, c)
		req := w.request(i)
		fx.calls = append(fx.calls, func(ctx context.Context) error {
			return c.Invoke(ctx, fullMethod, req, w.newResp())
		})
	}
	return fx, warmUp(ctx, w, fx, func(ctx context.Context, i int, resp proto.Message) error {
		return clients[i].Invoke(ctx, fullMethod, w.request(i), resp)
	})
}

// warmUp makes one checked call on every connection, so that each is open
// (grpc connects lazily) and each engine has served the workload once.
func warmUp(ctx context.Context, w workload, fx *fixture, call func(context.Context, int, proto.Message) error) error {
	for i := range fx.calls {
		resp := w.newResp()
		if err := call(ctx, i, resp); err != nil {
			return fmt.Errorf("first call on connection %d: %w", i, err)
		}
		if err := w.check(resp); err != nil {
			return fmt.Errorf("first call on connection %d: %w", i, err)
		}
	}
	return nil
}
