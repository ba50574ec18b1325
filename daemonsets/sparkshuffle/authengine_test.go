package sparkshuffle

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knitdev/knit/test/recordings"
)

// keylogEntry is one connection of a recording's keylog.txt.
type keylogEntry struct {
	clientPriv, key, inIV, outIV []byte
}

// readKeylog reads keylog.txt: per client connection (in order) the
// client's X25519 private key and the session key and IVs it derived.
func readKeylog(t *testing.T, path string) []keylogEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []keylogEntry
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if strings.HasPrefix(line, "local=") {
			out = append(out, keylogEntry{})
			continue
		}
		raw, err := hex.DecodeString(v)
		if err != nil {
			continue
		}
		e := &out[len(out)-1]
		switch k {
		case "client_ephemeral_x25519_private_key":
			e.clientPriv = raw
		case "session_key":
			e.key = raw
		case "session_inIv":
			e.inIV = raw
		case "session_outIv":
			e.outIV = raw
		}
	}
	return out
}

// firstRPCBody is the body of the first RpcRequest/RpcResponse frame of a
// recorded stream.
func firstRPCBody(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	typ, p, err := readFrame(bufio.NewReader(bytes.NewReader(b)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	q, err := decodeRequest(typ, p)
	if err != nil {
		t.Fatal(err)
	}
	return q.body
}

// TestAuthEngineDerivesRecordedKeys recomputes, for every recorded crypto
// connection, the session key and IVs Spark's client derived, from the
// client's private key, the app secret and the server's AuthMessage: it
// checks the HKDF, AES-GCM, X25519 and version 1/2 derivations against
// Spark's own.
func TestAuthEngineDerivesRecordedKeys(t *testing.T) {
	for _, c := range []struct {
		dir     string
		secret  string
		version int
	}{
		{"c-crypto", "f501edd6b8f65c1e5d3811cf17a9140baa6d22776c24926c290bf96a9e7befcd", 1},
		{"c-crypto-v2", "9f6d24f8a7d75a9395553d96d04688769030da79a1e5e21992dc04b382a032a6", 2},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := recordings.Path(t, "spark-shuffle", c.dir)
			keys := readKeylog(t, filepath.Join(dir, "keylog.txt"))
			if len(keys) != 3 {
				t.Fatalf("%d keylog entries, want 3", len(keys))
			}
			for i, k := range keys {
				n := filepath.Join(dir, "0"+string(rune('1'+i)))
				hello, err := decodeAuthMessage(firstRPCBody(t, n+".c2s.bin"))
				if err != nil {
					t.Fatal(err)
				}
				resp := firstRPCBody(t, n+".s2c.bin")
				priv, err := ecdh.X25519().NewPrivateKey(k.clientPriv)
				if err != nil {
					t.Fatal(err)
				}
				ac := &authClient{version: c.version, secret: []byte(c.secret), priv: priv, hello: hello}
				got, err := ac.finish(resp)
				if err != nil {
					t.Fatalf("connection %d: %v", i+1, err)
				}
				if !bytes.Equal(got.key, k.key) || !bytes.Equal(got.servToClient, k.inIV) || !bytes.Equal(got.clientToServ, k.outIV) {
					t.Errorf("connection %d: derived key %x in %x out %x, Spark's %x %x %x", i+1,
						got.key, got.servToClient, got.clientToServ, k.key, k.inIV, k.outIV)
				}
				// The server's side opens the client's key with the same secret.
				if _, err := openPublicKey(hello, []byte(c.secret), nil); err != nil {
					t.Errorf("connection %d: client AuthMessage does not open: %v", i+1, err)
				}
				if _, err := openPublicKey(hello, []byte("0000wrongsecret0000"), nil); err == nil {
					t.Errorf("connection %d: client AuthMessage opens with a wrong secret", i+1)
				}
			}
		})
	}
}
