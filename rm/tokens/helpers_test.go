package tokens

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the start of every scripted scenario.
var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// fakeClock is a Clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// memStore keeps Keys as the bytes EncodeKeys writes, so every test that
// restarts a Manager also exercises the encoding.
type memStore struct {
	mu    sync.Mutex
	data  []byte
	saves int
	fail  error
}

func (s *memStore) Load(context.Context) (Keys, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return DecodeKeys(s.data)
}

func (s *memStore) Save(_ context.Context, k Keys) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	b, err := EncodeKeys(k)
	if err != nil {
		return err
	}
	s.data = b
	s.saves++
	return nil
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// testConfig is a Config with a fake clock, a seeded key source and the
// Hadoop default schedules.
func testConfig(clock Clock, store KeyStore) Config {
	return Config{
		Store: store,
		Clock: clock,
		Rand:  rand.NewChaCha8([32]byte{'k', 'n', 'i', 't'}),
	}
}

// testRMIdentifier is the cluster timestamp newManager's RM activates with.
const testRMIdentifier = 1732230000000

// newManager is a Manager activated as the RM with testRMIdentifier.
func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	return newManagerAs(t, cfg, testRMIdentifier)
}

// newManagerAs is a Manager activated as the RM with the given identifier.
func newManagerAs(t *testing.T, cfg Config, rmIdentifier int64) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := m.Activate(context.Background(), rmIdentifier); err != nil {
		t.Fatalf("Activate: %v", err)
	}
	return m
}

// seededStore returns a store holding the given current keys (nil rings are
// created by New) whose next roll is far away, so that tests can sign with
// recorded key ids.
func seededStore(t *testing.T, amrm, nm, container *MasterKey) *memStore {
	t.Helper()
	far := t0.Add(100 * 365 * 24 * time.Hour)
	ring := func(k *MasterKey) KeyRing {
		if k == nil {
			return KeyRing{}
		}
		return KeyRing{Current: k, NextRollAt: far, NextSerial: k.ID + 1}
	}
	s := &memStore{}
	if err := s.Save(context.Background(), Keys{
		Version:        KeysVersion,
		AMRM:           ring(amrm),
		NMToken:        ring(nm),
		ContainerToken: ring(container),
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func attempt(app int32, ts int64, n int32) *yarnpb.ApplicationAttemptIdProto {
	return &yarnpb.ApplicationAttemptIdProto{
		ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(app), ClusterTimestamp: proto.Int64(ts)},
		AttemptId:     proto.Int32(n),
	}
}

func node(host string, port int32) *yarnpb.NodeIdProto {
	return &yarnpb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(port)}
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantError checks err against a wanted Java class and message; an empty
// class means no error.
func wantError(t *testing.T, err error, class yarnerr.Class, msg string) {
	t.Helper()
	if class == "" {
		if err != nil {
			t.Fatalf("err = %v, want none", err)
		}
		return
	}
	var ye *yarnerr.Error
	if !errors.As(err, &ye) {
		t.Fatalf("err = %v, want %s: %q", err, class, msg)
	}
	if ye.Class != class || ye.Message != msg {
		t.Fatalf("err = %s: %q\nwant  %s: %q", ye.Class, ye.Message, class, msg)
	}
}

// recordedToken is a token found in a recording's decoded.txt.
type recordedToken struct {
	where string
	tok   token.Token
}

// decodedTokens returns every TokenProto printed in a decoded.txt
// (identifier, password, kind and service lines in a row), once each.
func decodedTokens(t *testing.T, path string) []recordedToken {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	defer f.Close()
	var out []recordedToken
	seen := map[string]bool{}
	var cur []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fields := []string{"identifier", "password", "kind", "service"}
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		want := fields[len(cur)]
		prefix := want + `: "`
		if !strings.HasPrefix(text, prefix) || !strings.HasSuffix(text, `"`) {
			cur = nil
			continue
		}
		cur = append(cur, unescapeText(t, text[len(prefix):len(text)-1]))
		if len(cur) < len(fields) {
			continue
		}
		tok := token.Token{Identifier: []byte(cur[0]), Password: []byte(cur[1]), Kind: cur[2], Service: cur[3]}
		cur = nil
		if seen[string(tok.Identifier)] {
			continue
		}
		seen[string(tok.Identifier)] = true
		where := filepath.Join(filepath.Base(filepath.Dir(filepath.Dir(path))), filepath.Base(filepath.Dir(path)))
		out = append(out, recordedToken{where: where + ":" + strconv.Itoa(line), tok: tok})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// unescapeText undoes protobuf text format's C escapes (\n, \t, \r, \", \',
// \\, \ooo octal, \xHH).
func unescapeText(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			t.Fatalf("dangling escape in %q", s)
		}
		switch e := s[i]; {
		case e == 'n':
			b.WriteByte('\n')
		case e == 'r':
			b.WriteByte('\r')
		case e == 't':
			b.WriteByte('\t')
		case e == '"' || e == '\'' || e == '\\':
			b.WriteByte(e)
		case e >= '0' && e <= '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, err := strconv.ParseUint(s[i:j], 8, 8)
			if err != nil {
				t.Fatalf("octal escape in %q: %v", s, err)
			}
			b.WriteByte(byte(v))
			i = j - 1
		case e == 'x':
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				t.Fatalf("hex escape in %q: %v", s, err)
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			t.Fatalf("unknown escape \\%c in %q", e, s)
		}
	}
	return b.String()
}

// credentialsToken returns the only token of a recorded container_tokens file.
func credentialsToken(t *testing.T, path string) token.Token {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	creds, err := token.ParseCredentials(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range creds.Tokens() {
		return tok
	}
	t.Fatalf("%s holds no token", path)
	return token.Token{}
}
