package amrmproxy

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// defaultStages is the default pipeline towards rm.
func defaultStages(rm string) map[string]Stage {
	return map[string]Stage{DefaultInterceptorName: DefaultStage(rm, noRetries)}
}

// startAM builds the attempt's pipeline with the real token "real-1" and
// returns the AM's client of the proxy with the local token.
func startAM(t *testing.T, svc *Service, proxy string) (*client.AMRMClient, token.Token) {
	t.Helper()
	local, err := svc.StartApplicationMaster(testCtx(t), testAttempt, "alice", rmToken("real-1"))
	if err != nil {
		t.Fatal(err)
	}
	am, err := client.NewAMRMClient(proxy, client.AMRMConfig{Token: local, NewBackOff: noRetries, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { am.Close() })
	return am, local
}

func ask(n int32) *yarnpb.AllocateRequestProto {
	return &yarnpb.AllocateRequestProto{Ask: []*yarnpb.ResourceRequestProto{{
		Priority: &yarnpb.PriorityProto{Priority: proto.Int32(1)}, ResourceName: proto.String("*"),
		Capability: &yarnpb.ResourceProto{Memory: proto.Int64(128), VirtualCores: proto.Int32(1)}, NumContainers: proto.Int32(n),
	}}}
}

func TestAMRunsThroughTheProxyWithTheRealTokenOnlyTowardsTheRM(t *testing.T) {
	ctx := testCtx(t)
	rm := &fakeRM{}
	svc, proxy := serveProxy(t, testSecrets(t), []string{DefaultInterceptorName}, defaultStages(rm.serve(t)))
	am, local := startAM(t, svc, proxy)

	if _, err := am.Register(ctx, "am-host", 1234, ""); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int32{2, 0} {
		resp, err := am.Allocate(ctx, ask(n))
		if err != nil {
			t.Fatalf("allocate %d: %v", i, err)
		}
		if got := resp.GetResponseId(); got != int32(i+1) {
			t.Fatalf("allocate %d answered response id %d, want %d", i, got, i+1)
		}
	}
	if err := am.Finish(ctx, client.StatusSucceeded, "", ""); err != nil {
		t.Fatal(err)
	}
	if got := rm.seenUsers(); !slices.Equal(got, []string{"real-1", "real-1", "real-1", "real-1"}) {
		t.Fatalf("the RM saw the calls of %q, want the real token's user each time", got)
	}
	if string(local.Identifier) == "real-1" {
		t.Fatal("the AM was handed the real token")
	}
	if got := svc.Attempts(); len(got) != 0 {
		t.Fatalf("pipelines %v left after a successful finish", got)
	}
	if _, _, err := svc.cfg.Secrets.RetrievePassword(local.Identifier); !errors.Is(err, yarnerr.InvalidToken) {
		t.Fatalf("the local token still verifies after finish: %v", err)
	}
}

func TestRMRenewedTokenIsKeptAndNeverReachesTheAM(t *testing.T) {
	ctx := testCtx(t)
	renewed := rmToken("real-2")
	rm := &fakeRM{renew: &renewed}
	svc, proxy := serveProxy(t, testSecrets(t), []string{DefaultInterceptorName}, defaultStages(rm.serve(t)))
	am, _ := startAM(t, svc, proxy)
	if _, err := am.Register(ctx, "am-host", 1234, ""); err != nil {
		t.Fatal(err)
	}
	resp, err := am.Allocate(ctx, ask(1))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAmRmToken() != nil {
		t.Fatalf("the AM got a token %q in its answer", resp.GetAmRmToken().GetIdentifier())
	}
	if _, err := am.Allocate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	users := rm.seenUsers()
	if got := users[len(users)-1]; got != "real-2" {
		t.Fatalf("the RM saw the heartbeat after the renewal from %q, want the renewed real token", got)
	}
}

func TestNodeKeyRollHandsTheAMANewLocalToken(t *testing.T) {
	ctx := testCtx(t)
	c := &clock{}
	secrets, err := NewSecrets(SecretsConfig{RollInterval: 3600e9, ActivationDelay: 60e9, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	rm := &fakeRM{}
	svc, proxy := serveProxy(t, secrets, []string{DefaultInterceptorName}, defaultStages(rm.serve(t)))
	am, local := startAM(t, svc, proxy)
	if _, err := am.Register(ctx, "am-host", 1234, ""); err != nil {
		t.Fatal(err)
	}
	mustRoll(t, secrets)
	resp, err := am.Allocate(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetAmRmToken()
	if got == nil {
		t.Fatal("no new local token after the node's key rolled")
	}
	if id := identifier(t, got.GetIdentifier()); id.GetKeyId() != secrets.next.id {
		t.Fatalf("new token under key %d, want the next key %d", id.GetKeyId(), secrets.next.id)
	}
	c.now = c.now.Add(60e9)
	secrets.Activate()
	if _, _, err := secrets.RetrievePassword(local.Identifier); !errors.Is(err, yarnerr.InvalidToken) {
		t.Fatalf("the old local token still verifies: %v", err)
	}
	// The AM's client moved to the new token, so it keeps working.
	if _, err := am.Allocate(ctx, nil); err != nil {
		t.Fatalf("allocate with the new local token: %v", err)
	}
}

func TestAllocateResponseIDs(t *testing.T) {
	tests := []struct {
		name    string
		ids     []int32 // response ids the AM sends after registering
		wantErr yarnerr.Class
		// wantRM is how many allocates reach the RM.
		wantRM int
	}{
		{"ids in order reach the RM", []int32{0, 1, 2}, "", 3},
		{"a resent heartbeat gets the previous answer", []int32{0, 1, 1}, "", 2},
		{"an id out of order is refused", []int32{0, 5}, yarnerr.InvalidApplicationMasterRequest, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			rm := &fakeRM{}
			svc, proxy := serveProxy(t, testSecrets(t), []string{DefaultInterceptorName}, defaultStages(rm.serve(t)))
			am := registeredAM(t, svc, proxy)
			var err2 error
			var prev *yarnpb.AllocateResponseProto
			for _, id := range tt.ids {
				var resp *yarnpb.AllocateResponseProto
				resp, err2 = am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(id)})
				if err2 != nil {
					break
				}
				if prev != nil && id+1 == prev.GetResponseId() && !proto.Equal(resp, prev) {
					t.Fatalf("resend answered %v, want the previous answer %v", resp, prev)
				}
				prev = resp
			}
			if tt.wantErr == "" && err2 != nil || tt.wantErr != "" && !errors.Is(err2, tt.wantErr) {
				t.Fatalf("allocates ended with %v, want %v", err2, tt.wantErr)
			}
			rm.mu.Lock()
			defer rm.mu.Unlock()
			if len(rm.asks) != tt.wantRM {
				t.Fatalf("%d allocates reached the RM, want %d", len(rm.asks), tt.wantRM)
			}
		})
	}
}

func TestCallsOfAnAMWithoutAPipelineAreRefused(t *testing.T) {
	tests := []struct {
		name string
		// end ends the pipeline after register, or leaves it.
		end     func(svc *Service)
		connect bool // whether the connection itself still authenticates
	}{
		{"after the node learns the application ended", func(svc *Service) { svc.EndApplication(t.Context(), testAttempt.App) }, false},
		{"after the attempt's AM container is gone", func(svc *Service) { svc.EndAttempt(testAttempt) }, false},
		{"of another attempt ending", func(svc *Service) { svc.EndAttempt(yarnid.AttemptID{App: testAttempt.App, ID: 2}) }, true},
		{"of another application ending", func(svc *Service) {
			svc.EndApplication(t.Context(), yarnid.ApplicationID{ClusterTimestamp: 1, ID: 1})
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			rm := &fakeRM{}
			svc, proxy := serveProxy(t, testSecrets(t), []string{DefaultInterceptorName}, defaultStages(rm.serve(t)))
			local, err := svc.StartApplicationMaster(ctx, testAttempt, "alice", rmToken("real-1"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rawAM(t, proxy, local).RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{}); err != nil {
				t.Fatal(err)
			}
			tt.end(svc)
			// A new connection, as the AM makes after an idle close.
			_, err = rawAM(t, proxy, local).Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(0)})
			if tt.connect != (err == nil) {
				t.Fatalf("allocate = %v, want success %v", err, tt.connect)
			}
		})
	}
}

func TestStartApplicationMaster(t *testing.T) {
	failing := func(App, Interceptor) (Interceptor, error) { return nil, errors.New("boom") }
	tests := []struct {
		name     string
		pipeline []string
		stages   map[string]Stage
		tok      token.Token
		wantErr  bool
	}{
		{"the default pipeline starts", []string{DefaultInterceptorName}, defaultStages("127.0.0.1:1"), rmToken("real-1"), false},
		{"a token of another kind is refused", []string{DefaultInterceptorName}, defaultStages("127.0.0.1:1"), token.Token{Kind: "NMToken"}, true},
		{"the default interceptor before another is refused", []string{DefaultInterceptorName, "x"},
			map[string]Stage{DefaultInterceptorName: DefaultStage("127.0.0.1:1", noRetries), "x": DefaultStage("127.0.0.1:1", noRetries)}, rmToken("real-1"), true},
		{"a stage that fails fails the start", []string{"x", DefaultInterceptorName},
			map[string]Stage{DefaultInterceptorName: DefaultStage("127.0.0.1:1", noRetries), "x": failing}, rmToken("real-1"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := New(Config{Secrets: testSecrets(t), Pipeline: tt.pipeline, Stages: tt.stages, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			_, err = svc.StartApplicationMaster(context.Background(), testAttempt, "alice", tt.tok)
			if (err != nil) != tt.wantErr {
				t.Fatalf("StartApplicationMaster = %v, want error %v", err, tt.wantErr)
			}
			if want := !tt.wantErr; (len(svc.Attempts()) == 1) != want {
				t.Fatalf("pipelines %v, want one: %v", svc.Attempts(), want)
			}
		})
	}
}

func TestNewRefusesAPipelineNamingAnUnknownInterceptor(t *testing.T) {
	if _, err := New(Config{Secrets: testSecrets(t), Pipeline: []string{"org.example.Nope"}, Stages: defaultStages("x")}); err == nil {
		t.Fatal("New accepted an unknown interceptor")
	}
}
