package sparkshuffle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/knitdev/knit/test/eventually"
)

// waitConnections waits for the service's connection goroutines to end
// after a client closed its side.
func waitConnections(t *testing.T, s *Service, want int64) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.Stats()
		if st.Connections == want || time.Now().After(deadline) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStatsCountConnectionsExecutorsAndBlocks(t *testing.T) {
	nd := newNode(t, func(cfg *Config) { cfg.Authenticate = true })
	if got := nd.svc.Stats(); got != (Stats{}) {
		t.Errorf("a new service: %+v", got)
	}
	dirs := nd.app(3, "carol", "s3cret")
	app := appID(3).String()
	if got := nd.svc.Stats(); got.Applications != 1 || got.Executors != 0 {
		t.Errorf("after one application: %+v", got)
	}
	c, err := nd.dial(ClientConfig{AppID: app, Secret: []byte("s3cret"), Auth: AuthSASL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	register(t, c, app, dirs)
	got, err := fetchAll(c, app)
	if err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, got)
	var bytes int64
	for _, b := range got {
		bytes += int64(len(b))
	}
	// A block counts once its last byte left the server, which can be just
	// after the client read it.
	fetched := func() bool {
		st := nd.svc.Stats()
		return st.Connections == 1 && st.Executors == 1 && st.BlocksSent == int64(len(got)) && st.BytesSent == bytes && st.ChunksInFlight == 0 && st.AuthFailures == 0
	}
	eventually.True(t, 5*time.Second, fmt.Sprintf("stats after a fetch of %d blocks, %d bytes", len(got), bytes), fetched)
	if _, err := nd.dial(ClientConfig{AppID: app, Secret: []byte("wrong"), Auth: AuthSASL}); err == nil {
		t.Fatal("a wrong secret was accepted")
	}
	if st := nd.svc.Stats(); st.AuthFailures != 1 {
		t.Errorf("after a wrong secret: %+v", st)
	}
	c.Close()
	if st := waitConnections(t, nd.svc, 0); st.Connections != 0 {
		t.Errorf("after the clients closed: %+v", st)
	}
	if err := nd.svc.StopApplication(context.Background(), appID(3)); err != nil {
		t.Fatal(err)
	}
	if st := nd.svc.Stats(); st.Applications != 0 || st.Executors != 0 || st.BlocksSent != int64(len(got)) {
		t.Errorf("after the application stopped: %+v", st)
	}
}
