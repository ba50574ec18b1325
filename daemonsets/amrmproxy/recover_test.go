package amrmproxy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// nodeLife is one process of knit-node's AMRMProxy over a state folder:
// its keys and its Service, recovered from what the last life kept.
func nodeLife(t *testing.T, store *FileStore, pipeline []string, stages map[string]Stage) (*Service, string, int) {
	t.Helper()
	secrets, err := NewSecrets(SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute, Keys: store})
	if err != nil {
		t.Fatal(err)
	}
	var recovered int
	svc, addr := serveProxyWith(t, Config{Secrets: secrets, Pipeline: pipeline, Stages: stages, Logger: quiet, State: store}, func(svc *Service) {
		n, err := svc.Recover(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		recovered = n
	})
	return svc, addr, recovered
}

func TestARestartedNodeServesItsAMsOnWithTheTokensTheyHold(t *testing.T) {
	ctx := testCtx(t)
	rm := &fakeRM{}
	rmAddr := rm.serve(t)
	store, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pipeline := []string{ThrottleInterceptorName, DefaultInterceptorName}
	stages := func() map[string]Stage {
		return map[string]Stage{
			DefaultInterceptorName:  DefaultStage(rmAddr, noRetries),
			ThrottleInterceptorName: ThrottleStage(ThrottleSettings{}, nil),
		}
	}

	first, proxy, n := nodeLife(t, store, pipeline, stages())
	if n != 0 {
		t.Fatalf("a new node recovered %d pipelines", n)
	}
	local, err := first.StartApplicationMaster(ctx, testAttempt, "alice", rmToken("real-1"))
	if err != nil {
		t.Fatal(err)
	}
	am := rawAM(t, proxy, local)
	if _, err := am.RegisterApplicationMaster(ctx, &yarnpb.RegisterApplicationMasterRequestProto{Host: proto.String("am-host")}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(int32(i))}); err != nil {
			t.Fatalf("allocate %d: %v", i, err)
		}
	}
	// The RM renews the real token; the next life must use the new one.
	renewed := rmToken("real-2")
	rm.mu.Lock()
	rm.renew = &renewed
	rm.mu.Unlock()
	if _, err := am.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	// knit-node stops (a rollout): its pipelines close, their state stays.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second, proxy2, n := nodeLife(t, store, pipeline, stages())
	if n != 1 {
		t.Fatalf("recovered %d pipelines, want the AM's", n)
	}
	if got := second.Attempts(); !slices.Equal(got, []yarnid.AttemptID{testAttempt}) {
		t.Fatalf("pipelines %v, want %v", got, testAttempt)
	}
	before := len(rm.seenUsers())
	// The AM, with the local token of the first life, heartbeats on.
	am2 := rawAM(t, proxy2, local)
	for i := int32(3); i < 5; i++ {
		resp, err := am2.Allocate(ctx, &yarnpb.AllocateRequestProto{ResponseId: proto.Int32(i)})
		if err != nil {
			t.Fatalf("allocate %d after the restart: %v", i, err)
		}
		if resp.GetResponseId() != i+1 {
			t.Errorf("allocate %d answered %d, want %d", i, resp.GetResponseId(), i+1)
		}
	}
	// Towards the RM, with the renewed token, and no register: the RM's
	// fake refuses a second one.
	if after := rm.seenUsers()[before:]; len(after) == 0 || slices.ContainsFunc(after, func(u string) bool { return u != "real-2" }) {
		t.Errorf("after the restart the RM saw the calls of %q, want the renewed token's user alone", after)
	}
	rm.mu.Lock()
	lastID := rm.lastID
	rm.mu.Unlock()
	if lastID != 5 {
		t.Errorf("the RM answered up to %d, want 5: one heartbeat each, none lost", lastID)
	}

	// The AM finishes: the attempt leaves the state, and a third life
	// recovers nothing.
	if _, err := am2.FinishApplicationMaster(ctx, &yarnpb.FinishApplicationMasterRequestProto{}); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, n := nodeLife(t, store, pipeline, stages()); n != 0 {
		t.Errorf("a finished attempt came back: %d pipelines", n)
	}
}

// plainStage is a stage that cannot resume an attempt: it passes the
// protocol's calls on, and nothing else.
type plainStage struct{ next Interceptor }

func (p plainStage) RegisterApplicationMaster(ctx context.Context, req *yarnpb.RegisterApplicationMasterRequestProto) (*yarnpb.RegisterApplicationMasterResponseProto, error) {
	return p.next.RegisterApplicationMaster(ctx, req)
}

func (p plainStage) Allocate(ctx context.Context, req *yarnpb.AllocateRequestProto) (*yarnpb.AllocateResponseProto, error) {
	return p.next.Allocate(ctx, req)
}

func (p plainStage) FinishApplicationMaster(ctx context.Context, req *yarnpb.FinishApplicationMasterRequestProto) (*yarnpb.FinishApplicationMasterResponseProto, error) {
	return p.next.FinishApplicationMaster(ctx, req)
}

func (plainStage) Close() error { return nil }

func TestRecoverForgetsAnAttemptWhosePipelineCannotResume(t *testing.T) {
	rm := &fakeRM{}
	rmAddr := rm.serve(t)
	store, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pipeline := []string{"plain", DefaultInterceptorName}
	stages := map[string]Stage{
		DefaultInterceptorName: DefaultStage(rmAddr, noRetries),
		"plain":                func(_ App, next Interceptor) (Interceptor, error) { return plainStage{next}, nil },
	}
	first, proxy, _ := nodeLife(t, store, pipeline, stages)
	local, err := first.StartApplicationMaster(testCtx(t), testAttempt, "alice", rmToken("real-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawAM(t, proxy, local).RegisterApplicationMaster(testCtx(t), &yarnpb.RegisterApplicationMasterRequestProto{}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, _, n := nodeLife(t, store, pipeline, stages)
	if n != 0 || len(second.Attempts()) != 0 {
		t.Fatalf("recovered %d pipelines (%v), want none", n, second.Attempts())
	}
	if kept, err := store.LoadAttempts(); err != nil || len(kept) != 0 {
		t.Errorf("state left: %v, %v", kept, err)
	}
	if _, _, err := second.cfg.Secrets.RetrievePassword(local.Identifier); err == nil {
		t.Error("the forgotten attempt's local token still verifies")
	}
}

func TestSecretsKeepTheirKeysAcrossARestart(t *testing.T) {
	store, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	clock := func() time.Time { return now }
	cfg := SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute, Now: clock, Keys: store}
	first, err := NewSecrets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	old := first.Create(testAttempt)
	if err := first.Roll(); err != nil {
		t.Fatal(err)
	}
	next := first.Create(testAttempt)

	second, err := NewSecrets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := second.RetrievePassword(old.Identifier); !errors.Is(err, yarnerr.InvalidToken) {
		t.Fatalf("a token of an attempt not adopted verifies: %v", err)
	}
	second.Adopt(testAttempt)
	for name, tok := range map[string][]byte{"current key": old.Identifier, "next key": next.Identifier} {
		_, pw, err := second.RetrievePassword(tok)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := map[string][]byte{"current key": old.Password, "next key": next.Password}[name]; !slices.Equal(pw, want) {
			t.Errorf("%s: password differs after the restart", name)
		}
	}
	// The next key kept still becomes current once due, and the AM on
	// the old key is handed a token under it.
	if tok, ok := second.Refresh(identifier(t, old.Identifier)); !ok || !slices.Equal(tok.Password, next.Password) {
		t.Errorf("Refresh after the restart = %v, %v; want the token under the kept next key", tok, ok)
	}
	now = now.Add(time.Minute)
	second.Activate()
	if _, _, err := second.RetrievePassword(old.Identifier); !errors.Is(err, yarnerr.InvalidToken) {
		t.Errorf("the old key still verifies after the kept next key activated: %v", err)
	}
}

func TestFileStoreReadsWhatItCanAndNamesWhatItCannot(t *testing.T) {
	dir := t.TempDir()
	store, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	good := AttemptState{Attempt: testAttempt.String(), User: "alice", RMToken: rmToken("real-1"), Register: []byte{1}}
	if err := store.SaveAttempt(good); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveAttempt(AttemptState{Attempt: "not an attempt"}); err == nil {
		t.Error("saved the state of no attempt")
	}
	for name, data := range map[string][]byte{
		"appattempt_1_0001_000001.json": []byte("{"),
		"appattempt_1_0002_000001.json": make([]byte, maxStateFile+1),
	} {
		if err := os.WriteFile(filepath.Join(dir, "attempts", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := store.LoadAttempts()
	if err == nil {
		t.Error("a broken and an oversized file read without an error")
	}
	if len(kept) != 1 || kept[0].User != "alice" || !slices.Equal(kept[0].RMToken.Password, good.RMToken.Password) {
		t.Errorf("kept %+v, want the good attempt", kept)
	}
	if _, ok, err := store.LoadKeys(); ok || err != nil {
		t.Errorf("keys of a new store: %v, %v", ok, err)
	}
}

func TestAnAttemptStartedAgainKeepsTheNewPipelinesState(t *testing.T) {
	rm := &fakeRM{}
	rmAddr := rm.serve(t)
	store, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc, _, _ := nodeLife(t, store, []string{DefaultInterceptorName}, defaultStages(rmAddr))
	for _, real := range []string{"real-1", "real-2"} {
		if _, err := svc.StartApplicationMaster(testCtx(t), testAttempt, "alice", rmToken(real)); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := store.LoadAttempts()
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || string(kept[0].RMToken.Identifier) != "real-2" {
		t.Fatalf("kept %+v, want the second start's pipeline", kept)
	}
}
