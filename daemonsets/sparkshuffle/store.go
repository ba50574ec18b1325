package sparkshuffle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/renameio/v2"
)

// stateVersion is the format of the state file.
const stateVersion = 1

// storedExecutor is one registration in the state file.
type storedExecutor struct {
	App  string              `json:"app"`
	Exec string              `json:"exec"`
	Info ExecutorShuffleInfo `json:"info"`
}

type stateFile struct {
	Version   int              `json:"version"`
	Executors []storedExecutor `json:"executors"`
}

// loadState reads the registrations kept in path; a missing file is none.
func loadState(path string) ([]storedExecutor, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sparkshuffle: read state: %w", err)
	}
	var s stateFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("sparkshuffle: state %s: %w", path, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("sparkshuffle: state %s has version %d, not %d", path, s.Version, stateVersion)
	}
	return s.Executors, nil
}

// saveState replaces path with the registrations, atomically: a crash
// leaves the old file or the new one.
func saveState(path string, execs map[execKey]*executor) error {
	if path == "" {
		return nil
	}
	s := stateFile{Version: stateVersion}
	for k, e := range execs {
		s.Executors = append(s.Executors, storedExecutor{App: k.app, Exec: k.exec, Info: e.info})
	}
	slices.SortFunc(s.Executors, func(a, b storedExecutor) int {
		if c := strings.Compare(a.App, b.App); c != 0 {
			return c
		}
		return strings.Compare(a.Exec, b.Exec)
	})
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("sparkshuffle: encode state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("sparkshuffle: state folder: %w", err)
	}
	if err := renameio.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("sparkshuffle: write state: %w", err)
	}
	return nil
}

// execKey names an executor of an application.
type execKey struct{ app, exec string }
