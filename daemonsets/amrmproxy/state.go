package amrmproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
)

// What the AMRMProxy keeps across a restart of knit-node, as a NodeManager
// with recovery on keeps it in its state store (NMStateStoreService's
// AMRMProxy part): the node's master keys and, for each attempt with a
// pipeline, its user, newest real AMRMToken, registration and what its
// stages keep of their own (the federation interceptor's unmanaged AMs,
// as YARN's stores its entries with storeAMRMProxyAppContextEntry). The AM
// pods outlive knit-node's restarts (a DaemonSet rollout), so their AMs
// go on heartbeating with the local tokens they hold; without this state
// every AM on the node would fail its attempt.

// KeyState is one master key.
type KeyState struct {
	ID     int32  `json:"id"`
	Secret []byte `json:"secret"`
}

// KeysState is the node's signing state.
type KeysState struct {
	Current KeyState  `json:"current"`
	Next    *KeyState `json:"next,omitempty"`
	// Activate is when Next becomes current.
	Activate time.Time `json:"activate,omitzero"`
	// Serial is the id of the key made next.
	Serial int32 `json:"serial"`
}

// AttemptState is what rebuilds one attempt's pipeline.
type AttemptState struct {
	Attempt string      `json:"attempt"`
	User    string      `json:"user"`
	RMToken token.Token `json:"rmToken"`
	// Registered says the AM registered, with Register, its
	// RegisterApplicationMasterRequestProto encoded.
	Registered bool   `json:"registered,omitempty"`
	Register   []byte `json:"register,omitempty"`
	// Entries are the stages' own (App.Keep), by key.
	Entries map[string][]byte `json:"entries,omitempty"`
}

// maxStateFile bounds a state file read back: a key record is well under
// a kilobyte, and so is an attempt's but for the home's registration
// answer the federation interceptor keeps, which lists the containers
// the attempt took over from earlier ones.
const maxStateFile = 1 << 20

// FileStore keeps the state in files of one folder on the node, readable
// by knit-node's user alone: they hold real AMRMTokens and the keys that
// sign the local ones. Each file is replaced whole (write, rename), so a
// crash leaves the old state or the new, never half of one.
type FileStore struct {
	dir string
}

// NewFileStore returns the store of dir, creating it.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "attempts"), 0o700); err != nil {
		return nil, fmt.Errorf("amrmproxy: state folder: %w", err)
	}
	return &FileStore{dir: dir}, nil
}

func (f *FileStore) keysPath() string { return filepath.Join(f.dir, "keys.json") }

func (f *FileStore) attemptPath(a yarnid.AttemptID) string {
	return filepath.Join(f.dir, "attempts", a.String()+".json")
}

// SaveKeys replaces the keys.
func (f *FileStore) SaveKeys(k KeysState) error { return writeState(f.keysPath(), k) }

// LoadKeys reads the keys; ok is false when none were saved.
func (f *FileStore) LoadKeys() (k KeysState, ok bool, err error) {
	ok, err = readState(f.keysPath(), &k)
	return k, ok, err
}

// SaveAttempt replaces an attempt's state.
func (f *FileStore) SaveAttempt(s AttemptState) error {
	a, err := yarnid.ParseAttemptID(s.Attempt)
	if err != nil {
		return fmt.Errorf("amrmproxy: save attempt: %w", err)
	}
	return writeState(f.attemptPath(a), s)
}

// RemoveAttempt forgets an attempt.
func (f *FileStore) RemoveAttempt(a yarnid.AttemptID) error {
	if err := os.Remove(f.attemptPath(a)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("amrmproxy: forget %s: %w", a, err)
	}
	return nil
}

// LoadAttempts reads every attempt's state. A file that does not read is
// an error naming it: the caller decides whether to go on without it.
func (f *FileStore) LoadAttempts() ([]AttemptState, error) {
	dir := filepath.Join(f.dir, "attempts")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("amrmproxy: read state: %w", err)
	}
	var out []AttemptState
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue // renameio's temporary files among them
		}
		var s AttemptState
		if _, err := readState(filepath.Join(dir, e.Name()), &s); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

func writeState(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("amrmproxy: encode %s: %w", filepath.Base(path), err)
	}
	if err := renameio.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("amrmproxy: save state: %w", err)
	}
	return nil
}

func readState(path string, v any) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("amrmproxy: read state: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return false, fmt.Errorf("amrmproxy: read state %s: %w", filepath.Base(path), err)
	}
	if len(b) > maxStateFile {
		return false, fmt.Errorf("amrmproxy: state file %s is over %d bytes", filepath.Base(path), maxStateFile)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("amrmproxy: decode state %s: %w", filepath.Base(path), err)
	}
	return true, nil
}
