package sparkshuffle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/protocols/yarnid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sortManager = "org.apache.spark.shuffle.sort.SortShuffleManager"

// node is a service over a node's local dirs with one application's map
// outputs laid out.
type node struct {
	t         *testing.T
	svc       *Service
	localDirs []string
	cfg       Config
}

func appID(n int32) yarnid.ApplicationID {
	return yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: n}
}

// execDirs are executor 1's block manager dirs of app n.
func (nd *node) execDirs(n int32, user string) []string {
	var out []string
	for i, ld := range nd.localDirs {
		out = append(out, filepath.Join(ld, "usercache", user, "appcache", appID(n).String(), fmt.Sprintf("blockmgr-%d", i)))
	}
	return out
}

func partition(s, m, r int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("shuffle_%d_%d_%d|", s, m, r)), 10*(r+1))
}

func newNode(t *testing.T, mutate func(*Config)) *node {
	t.Helper()
	root := t.TempDir()
	nd := &node{t: t, localDirs: []string{filepath.Join(root, "ld1"), filepath.Join(root, "ld2")}}
	nd.cfg = Config{
		Address:   "127.0.0.1:0",
		LocalDirs: nd.localDirs,
		StateFile: filepath.Join(root, "state", "executors.json"),
		Logger:    testLogger(t),
	}
	if mutate != nil {
		mutate(&nd.cfg)
	}
	nd.svc = startService(t, nd.cfg)
	return nd
}

// app lays out app n's map outputs (shuffle 0, maps 0..2, 4 partitions)
// and initializes it with secret.
func (nd *node) app(n int32, user, secret string) []string {
	nd.t.Helper()
	dirs := nd.execDirs(n, user)
	for m := range 3 {
		var parts [][]byte
		for r := range 4 {
			parts = append(parts, partition(0, m, r))
		}
		if err := WriteMapOutput(dirs, 64, 0, int64(m), parts); err != nil {
			nd.t.Fatal(err)
		}
	}
	if err := nd.svc.InitializeApplication(context.Background(), auxservice.Application{User: user, ID: appID(n), ServiceData: []byte(secret)}); err != nil {
		nd.t.Fatal(err)
	}
	return dirs
}

func (nd *node) dial(cfg ClientConfig) (*Client, error) {
	return Dial(context.Background(), nd.svc.Addr().String(), cfg)
}

func register(t *testing.T, c *Client, app string, dirs []string) {
	t.Helper()
	if err := c.RegisterExecutor(&RegisterExecutor{AppID: app, ExecID: "1", Info: ExecutorShuffleInfo{LocalDirs: dirs, SubDirsPerLocalDir: 64, ShuffleManager: sortManager}}); err != nil {
		t.Fatalf("RegisterExecutor: %v", err)
	}
}

func fetchAll(c *Client, app string) ([][]byte, error) {
	var got [][]byte
	err := c.Fetch(&FetchShuffleBlocks{AppID: app, ExecID: "1", MapIDs: []int64{0, 2}, ReduceIDs: [][]int32{{0, 3}, {1}}},
		func(_ int, b []byte) error { got = append(got, bytes.Clone(b)); return nil })
	return got, err
}

func checkBlocks(t *testing.T, got [][]byte) {
	t.Helper()
	want := [][]byte{partition(0, 0, 0), partition(0, 0, 3), partition(0, 2, 1)}
	if len(got) != len(want) {
		t.Fatalf("%d blocks, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("block %d = %q…, want %q…", i, got[i][:min(20, len(got[i]))], want[i][:20])
		}
	}
}

func TestAuthModesServeBlocks(t *testing.T) {
	for _, c := range []struct {
		name    string
		crypto  bool
		version int
		mode    AuthMode
	}{
		{"sasl", false, 1, AuthSASL},
		{"crypto-v1", true, 1, AuthCrypto},
		{"crypto-v2", true, 2, AuthCrypto},
		{"crypto-server-sasl-client", true, 1, AuthSASL},
	} {
		t.Run(c.name, func(t *testing.T) {
			nd := newNode(t, func(cfg *Config) {
				cfg.Authenticate, cfg.CryptoEnabled, cfg.AuthEngineVersion = true, c.crypto, c.version
			})
			dirs := nd.app(7, "alice", "s3cret")
			app := appID(7).String()
			cl, err := nd.dial(ClientConfig{AppID: app, Secret: []byte("s3cret"), Auth: c.mode, AuthEngineVersion: c.version})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			register(t, cl, app, dirs)
			got, err := fetchAll(cl, app)
			if err != nil {
				t.Fatal(err)
			}
			checkBlocks(t, got)
			if _, err := nd.dial(ClientConfig{AppID: app, Secret: []byte("wrong"), Auth: c.mode, AuthEngineVersion: c.version}); err == nil {
				t.Error("a wrong secret was accepted")
			}
			if c.mode == AuthCrypto && nd.svc.bufferedCopies.Load() == 0 {
				t.Error("encrypted blocks were not copied through the cipher")
			}
		})
	}
}

// TestConnectionBoundToItsApplication: a connection authenticated for one
// application gets none of another's blocks, nor may register or remove
// for it, nor fetch its streams.
func TestConnectionBoundToItsApplication(t *testing.T) {
	nd := newNode(t, func(cfg *Config) { cfg.Authenticate = true })
	dirsA := nd.app(1, "alice", "secret-a")
	dirsB := nd.app(2, "bob", "secret-b")
	a, b := appID(1).String(), appID(2).String()
	cb, err := nd.dial(ClientConfig{AppID: b, Secret: []byte("secret-b"), Auth: AuthSASL})
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	register(t, cb, b, dirsB)
	ca, err := nd.dial(ClientConfig{AppID: a, Secret: []byte("secret-a"), Auth: AuthSASL})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	register(t, ca, a, dirsA)
	want := fmt.Sprintf("java.lang.SecurityException: Client for %s not authorized for application %s.", a, b)
	var re *RemoteError
	if _, err := fetchAll(ca, b); !errors.As(err, &re) || firstLine(re.Text) != want {
		t.Errorf("fetch of another app's blocks: %v, want %s", err, want)
	}
	err = ca.RegisterExecutor(&RegisterExecutor{AppID: b, ExecID: "9", Info: ExecutorShuffleInfo{LocalDirs: dirsB, SubDirsPerLocalDir: 64, ShuffleManager: sortManager}})
	if !errors.As(err, &re) || firstLine(re.Text) != want {
		t.Errorf("register for another app: %v", err)
	}
	// App A may not register dirs in B's folder either.
	err = ca.RegisterExecutor(&RegisterExecutor{AppID: a, ExecID: "9", Info: ExecutorShuffleInfo{LocalDirs: dirsB, SubDirsPerLocalDir: 64, ShuffleManager: sortManager}})
	if !errors.As(err, &re) || !strings.Contains(re.Text, "is not in the folder of application") {
		t.Errorf("register of another app's dirs: %v", err)
	}
	// Nor dirs elsewhere on the node, nor a relative path out of its folder.
	for _, d := range []string{"/etc", dirsA[0] + "/../../../../../../etc", "relative"} {
		err = ca.RegisterExecutor(&RegisterExecutor{AppID: a, ExecID: "9", Info: ExecutorShuffleInfo{LocalDirs: []string{d}, SubDirsPerLocalDir: 64, ShuffleManager: sortManager}})
		if !errors.As(err, &re) {
			t.Errorf("register of %s: %v", d, err)
		}
	}
	got, err := fetchAll(ca, a)
	if err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, got)
}

// TestSymlinkOutOfTheAppFolderIsNotFollowed: a block file the executor
// replaced by a symlink to another application's file is not served.
func TestSymlinkOutOfTheAppFolderIsNotFollowed(t *testing.T) {
	nd := newNode(t, nil)
	dirsA := nd.app(1, "alice", "")
	dirsB := nd.app(2, "bob", "")
	a := appID(1).String()
	data := FilePath(dirsA, 64, "shuffle_0_0_0.data")
	if err := os.Remove(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(FilePath(dirsB, 64, "shuffle_0_0_0.data"), data); err != nil {
		t.Fatal(err)
	}
	c, err := nd.dial(ClientConfig{AppID: a})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	register(t, c, a, dirsA)
	if _, err := fetchAll(c, a); err == nil {
		t.Fatal("a block behind a symlink out of the app folder was served")
	}
}

// TestRegistrationsSurviveRestart: executors registered before a restart
// are served after it, and go when their application stops.
func TestRegistrationsSurviveRestart(t *testing.T) {
	nd := newNode(t, nil)
	dirs := nd.app(3, "carol", "")
	app := appID(3).String()
	c, err := nd.dial(ClientConfig{AppID: app})
	if err != nil {
		t.Fatal(err)
	}
	register(t, c, app, dirs)
	c.Close()

	restarted := startService(t, nd.cfg)
	c2, err := Dial(context.Background(), restarted.Addr().String(), ClientConfig{AppID: app})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got, err := fetchAll(c2, app)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	checkBlocks(t, got)
	if err := restarted.StopApplication(context.Background(), appID(3)); err != nil {
		t.Fatal(err)
	}
	stored, err := loadState(nd.cfg.StateFile)
	if err != nil || len(stored) != 0 {
		t.Errorf("state after stop: %v, %v", stored, err)
	}
	var re *RemoteError
	if _, err := fetchAll(c2, app); !errors.As(err, &re) || !strings.Contains(re.Text, "Executor is not registered") {
		t.Errorf("fetch after stop: %v", err)
	}
}

// TestPlainConnectionsUseSendfile: block bodies on a plain connection go
// from the file to the socket without a buffered copy.
func TestPlainConnectionsUseSendfile(t *testing.T) {
	nd := newNode(t, nil)
	dirs := nd.app(4, "dave", "")
	app := appID(4).String()
	c, err := nd.dial(ClientConfig{AppID: app})
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
	if n := nd.svc.bufferedCopies.Load(); n != 0 {
		t.Errorf("%d buffered copies on a plain connection", n)
	}
}

func TestLimits(t *testing.T) {
	nd := newNode(t, func(cfg *Config) { cfg.MaxStreamsPerConn = 2; cfg.MaxFrameBytes = 1024 })
	dirs := nd.app(5, "erin", "")
	app := appID(5).String()
	c, err := nd.dial(ClientConfig{AppID: app})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	register(t, c, app, dirs)
	open := func() error {
		_, err := c.rpc(encodeMessage(&OpenBlocks{AppID: app, ExecID: "1", BlockIDs: []string{"shuffle_0_0_0"}}))
		return err
	}
	for range 2 {
		if err := open(); err != nil {
			t.Fatal(err)
		}
	}
	var re *RemoteError
	if err := open(); !errors.As(err, &re) || !strings.Contains(re.Text, "Too many open streams") {
		t.Errorf("third open stream: %v", err)
	}
	// A frame beyond the bound closes the connection.
	if _, err := c.rpc(make([]byte, 2048)); err == nil {
		t.Error("an oversized frame was answered")
	}
}

func TestConfigFromHadoop(t *testing.T) {
	props := map[string]string{
		PropPort: "7447", PropAuthenticate: "true", PropCryptoEnabled: "true", PropAuthEngineVersion: "2",
		PropConnectionTimeout: "2min", PropIndexCacheSize: "10m", PropLocalDirs: "file:///a, /b",
	}
	cfg, err := ConfigFromHadoop(func(k string) (string, bool) { v, ok := props[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Address != ":7447" || !cfg.Authenticate || !cfg.CryptoEnabled || cfg.AuthEngineVersion != 2 ||
		cfg.IdleTimeout != 2*time.Minute || cfg.IndexCacheBytes != 10<<20 || strings.Join(cfg.LocalDirs, ",") != "/a,/b" {
		t.Errorf("config %+v", cfg)
	}
	for k, v := range map[string]string{PropCryptoCipher: "AES/GCM/NoPadding", PropSaslServerEncrypt: "true", PropAuthEngineVersion: "3"} {
		if _, err := ConfigFromHadoop(func(n string) (string, bool) { return v, n == k }); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
}

func TestParseSecret(t *testing.T) {
	for in, want := range map[string]string{
		"abc": "abc",
		`{"secret":"xyz","spark.yarn.shuffle.server.recovery.disabled":true}`: "xyz",
		`{"other":1}`: `{"other":1}`,
		"":            "",
	} {
		if got := string(parseSecret([]byte(in))); got != want {
			t.Errorf("parseSecret(%q) = %q, want %q", in, got, want)
		}
	}
	sd, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "testdata", "spark-shuffle", "service_data", "spark_shuffle.recovery-disabled.example.json"))
	if err == nil && len(parseSecret(sd)) == 0 {
		t.Error("no secret in the recorded recovery-disabled service data")
	}
}

func TestNonNegativeHash(t *testing.T) {
	// Sub-dirs of the recorded files (served-data): 64 sub-dirs, 2 dirs.
	for name, want := range map[string]string{
		"shuffle_0_0_0.data": "ld1/26", "shuffle_0_0_0.index": "ld1/38", "shuffle_0_1_0.data": "ld2/2a",
		"shuffle_0_2_0.data": "ld1/3b", "shuffle_1_7_0.index": "ld1/24", "rdd_5_0": "ld2/2c",
	} {
		if got := filepath.Dir(FilePath([]string{"ld1", "ld2"}, 64, name)); got != want {
			t.Errorf("%s in %s, Spark put it in %s", name, got, want)
		}
	}
}
