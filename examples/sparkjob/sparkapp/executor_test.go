package sparkapp

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
)

// TestExecutorsShuffleThroughTheService runs two stage-1 executors that
// write and register with a real service, then stage-2 executors that
// fetch every block with both fetch protocols, and one with a wrong secret.
func TestExecutorsShuffleThroughTheService(t *testing.T) {
	const secret = "6c6f63616c2073656372657420666f722074686520756e69742074657374"
	app := yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}
	root := t.TempDir()
	svc, err := sparkshuffle.New(sparkshuffle.Config{Address: "127.0.0.1:0", LocalDirs: []string{root}, Authenticate: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := svc.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	if err := svc.InitializeApplication(ctx, auxservice.Application{User: "alice", ID: app, ServiceData: []byte(secret)}); err != nil {
		t.Fatal(err)
	}
	creds := &token.Credentials{}
	creds.AddSecret(SecretAlias, []byte(secret))
	b, err := creds.Marshal(token.FormatWritable)
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(tokenFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	host, p, _ := net.SplitHostPort(svc.Addr().String())
	port, _ := strconv.Atoi(p)
	appDir := filepath.Join(root, "usercache", "alice", "appcache", app.String())

	var writers []MapStatus
	for i, maps := range [][]int64{{0, 1}, {2}} {
		exec := strconv.Itoa(i + 1)
		var out bytes.Buffer
		err := RunExecutor(ctx, ExecutorOptions{
			Spec: ExecutorSpec{App: app.String(), ExecID: exec, Stage: 1, ShufflePort: port, MapIDs: maps, Partitions: 3, BlockBytes: 1000},
			Host: host, LocalDirs: []string{appDir}, TokenFile: tokenFile, Stdout: &out,
		})
		if err != nil {
			t.Fatalf("stage-1 executor %s: %v", exec, err)
		}
		writers = append(writers, MapStatus{ExecID: exec, Host: host, MapIDs: maps})
	}
	for _, c := range []struct {
		name      string
		old       bool
		wrong     bool
		wantLines int
		wantErr   string
	}{
		{name: "FetchShuffleBlocks", wantLines: 2},
		{name: "OpenBlocks", old: true, wantLines: 2},
		{name: "wrong secret", wrong: true, wantErr: "SASL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := RunExecutor(ctx, ExecutorOptions{
				Spec: ExecutorSpec{App: app.String(), ExecID: "3", Stage: 2, ShufflePort: port, Reduces: []int32{0, 2}, BlockBytes: 1000,
					Writers: writers, OldFetchProtocol: c.old, WrongSecret: c.wrong},
				Host: host, TokenFile: tokenFile, Stdout: &out,
			})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("RunExecutor: %v, want an error with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("RunExecutor: %v", err)
			}
			if n := strings.Count(out.String(), "all verified"); n != c.wantLines {
				t.Errorf("%d writers fetched, want %d:\n%s", n, c.wantLines, out.String())
			}
			if !strings.Contains(out.String(), "fetched 4 blocks") || !strings.Contains(out.String(), "fetched 2 blocks") {
				t.Errorf("block counts:\n%s", out.String())
			}
		})
	}
}

func TestBlockIsAFunctionOfItsID(t *testing.T) {
	a, b := Block(0, 3, 1, 4096), Block(0, 3, 1, 4096)
	if !bytes.Equal(a, b) || !bytes.HasPrefix(a, []byte("shuffle_0_3_1|")) {
		t.Fatalf("Block is not deterministic or lacks its name: %q…", a[:20])
	}
	if bytes.Equal(a, Block(0, 3, 2, 4096)) || bytes.Equal(a, Block(0, 4, 1, 4096)) {
		t.Error("two blocks have the same bytes")
	}
	if n := len(Block(0, 0, 0, 1)); n != len("shuffle_0_0_0|") {
		t.Errorf("a 1-byte block is %d bytes, want just its name", n)
	}
}
