package amrmproxy

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func askAt(priority, n int32) *yarnpb.ResourceRequestProto {
	return &yarnpb.ResourceRequestProto{
		Priority: &yarnpb.PriorityProto{Priority: proto.Int32(priority)}, ResourceName: proto.String("*"),
		Capability: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)}, NumContainers: proto.Int32(n),
	}
}

func containerAt(priority int32) *yarnpb.ContainerProto {
	return &yarnpb.ContainerProto{Priority: &yarnpb.PriorityProto{Priority: proto.Int32(priority)},
		Resource: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)}}
}

func TestThrottleInterceptorBoundsPendingContainers(t *testing.T) {
	tests := []struct {
		name string
		// heartbeats are the asks of each allocate, in order.
		heartbeats [][]*yarnpb.ResourceRequestProto
		// allocated is what the RM hands out on each answer.
		allocated []*yarnpb.ContainerProto
		wantErr   []bool // per heartbeat: refused
		wantRM    int    // allocates that reached the RM
	}{
		{"asks within the bound go through", [][]*yarnpb.ResourceRequestProto{{askAt(1, 3)}, {askAt(2, 2)}}, nil, []bool{false, false}, 2},
		{"an ask over the bound is refused", [][]*yarnpb.ResourceRequestProto{{askAt(1, 6)}}, nil, []bool{true}, 0},
		{"totals are per key, so raising one key counts its new total", [][]*yarnpb.ResourceRequestProto{{askAt(1, 4)}, {askAt(1, 5)}, {askAt(1, 6)}}, nil, []bool{false, false, true}, 2},
		{"asking less is never refused", [][]*yarnpb.ResourceRequestProto{{askAt(1, 5)}, {askAt(1, 0), askAt(2, 1)}}, nil, []bool{false, false}, 2},
		{"allocated containers are no longer pending", [][]*yarnpb.ResourceRequestProto{{askAt(1, 5)}, {askAt(2, 3)}},
			[]*yarnpb.ContainerProto{containerAt(1), containerAt(1), containerAt(1)}, []bool{false, false}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			rm := &fakeRM{allocated: tt.allocated}
			stages := defaultStages(rm.serve(t))
			stages[ThrottleInterceptorName] = ThrottleStage(ThrottleSettings{MaxPending: 5}, nil)
			svc, proxy := serveProxy(t, testSecrets(t), []string{ThrottleInterceptorName, DefaultInterceptorName}, stages)
			am := registeredAM(t, svc, proxy)
			id := int32(0)
			for i, asks := range tt.heartbeats {
				resp, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id), Ask: asks})
				if refused := errors.Is(err, yarnerr.InvalidResourceRequest); refused != tt.wantErr[i] || err != nil && !refused {
					t.Fatalf("heartbeat %d: %v, want refused %v", i, err, tt.wantErr[i])
				}
				if err == nil {
					id = resp.GetResponseId()
				}
			}
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if len(rm.asks) != tt.wantRM {
				t.Fatalf("%d allocates reached the RM, want %d", len(rm.asks), tt.wantRM)
			}
		})
	}
}

func TestThrottleInterceptorSpacesHeartbeats(t *testing.T) {
	ctx := testCtx(t)
	rm := &fakeRM{}
	stages := defaultStages(rm.serve(t))
	const interval = 200 * time.Millisecond
	stages[ThrottleInterceptorName] = ThrottleStage(ThrottleSettings{MinInterval: interval}, nil)
	svc, proxy := serveProxy(t, testSecrets(t), []string{ThrottleInterceptorName, DefaultInterceptorName}, stages)
	am := registeredAM(t, svc, proxy)
	start := time.Now()
	for id := int32(0); id < 3; id++ {
		if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 2*interval {
		t.Fatalf("three heartbeats took %s, want at least two intervals (%s)", took, 2*interval)
	}
}

func TestThrottleStageMustNotBeLast(t *testing.T) {
	if _, err := ThrottleStage(ThrottleSettings{}, nil)(App{}, nil); err == nil {
		t.Fatal("a last throttling stage was built")
	}
}

func TestThrottleSettingsFromHadoop(t *testing.T) {
	tests := []struct {
		name    string
		set     map[string]string
		want    ThrottleSettings
		wantErr bool
	}{
		{"no bounds by default", nil, ThrottleSettings{}, false},
		{"both bounds", map[string]string{hadoopconf.KeyAMRMProxyThrottleMaxPending: "100", hadoopconf.KeyAMRMProxyThrottleMinInterval: "250"},
			ThrottleSettings{MaxPending: 100, MinInterval: 250 * time.Millisecond}, false},
		{"a negative bound is refused", map[string]string{hadoopconf.KeyAMRMProxyThrottleMaxPending: "-1"}, ThrottleSettings{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{})
			for k, v := range tt.set {
				c.Set(k, v)
			}
			got, err := ThrottleSettingsFromHadoop(c)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ThrottleSettingsFromHadoop = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
