package logs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// appRecordName is the file beside an application's container log
// folders that keeps its owner and ACLs.
const appRecordName = ".knit-application.json"

// Dirs are the node's log dirs (yarn.nodemanager.log-dirs).
type Dirs []string

// FileInfo is one log file of a container.
type FileInfo struct {
	Name string
	Path string
	Info fs.FileInfo
}

// AppRecord is what the node keeps about an application beside its logs.
type AppRecord struct {
	Owner string           `json:"owner"`
	ACLs  []aggregated.ACL `json:"acls,omitempty"`
	// LogAggregation is the application's LogAggregationContext, nil
	// when it was submitted without one (every log file is aggregated).
	LogAggregation *launch.LogAggregationContext `json:"logAggregationContext,omitempty"`
}

// validName reports whether s can name a log file, container or
// application folder without leaving it.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// Files returns the regular files in the container's log folders, sorted
// by name; a container without logs has none.
func (d Dirs) Files(app, container string) ([]FileInfo, error) {
	if !validName(app) || !validName(container) {
		return nil, nil
	}
	var out []FileInfo
	for _, root := range d {
		dir := filepath.Join(root, app, container)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list logs of %s: %w", container, err)
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			out = append(out, FileInfo{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Info: info})
		}
	}
	slices.SortStableFunc(out, func(a, b FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// File returns one log file of a container.
func (d Dirs) File(app, container, name string) (FileInfo, bool) {
	if !validName(name) {
		return FileInfo{}, false
	}
	files, err := d.Files(app, container)
	if err != nil {
		return FileInfo{}, false
	}
	for _, f := range files {
		if f.Name == name {
			return f, true
		}
	}
	return FileInfo{}, false
}

// Applications returns the applications with a log folder on the node.
func (d Dirs) Applications() ([]string, error) {
	var out []string
	for _, root := range d {
		entries, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list log dir: %w", err)
		}
		for _, e := range entries {
			if _, err := yarnid.ParseApplicationID(e.Name()); err == nil && e.IsDir() && !slices.Contains(out, e.Name()) {
				out = append(out, e.Name())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Containers returns the containers with a log folder of app.
func (d Dirs) Containers(app string) ([]string, error) {
	if !validName(app) {
		return nil, nil
	}
	var out []string
	for _, root := range d {
		entries, err := os.ReadDir(filepath.Join(root, app))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list logs of %s: %w", app, err)
		}
		for _, e := range entries {
			if _, err := yarnid.ParseContainerID(e.Name()); err == nil && e.IsDir() && !slices.Contains(out, e.Name()) {
				out = append(out, e.Name())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Record returns the application's record, ok false if none was kept.
func (d Dirs) Record(app string) (AppRecord, bool) {
	var r AppRecord
	if len(d) == 0 || !validName(app) {
		return r, false
	}
	b, err := os.ReadFile(filepath.Join(d[0], app, appRecordName))
	if err != nil || json.Unmarshal(b, &r) != nil || r.Owner == "" {
		return AppRecord{}, false
	}
	return r, true
}

// hasContainer reports whether the container has a log folder in the
// first log dir.
func (d Dirs) hasContainer(app, container string) bool {
	if len(d) == 0 || !validName(app) || !validName(container) {
		return false
	}
	st, err := os.Stat(filepath.Join(d[0], app, container))
	return err == nil && st.IsDir()
}

// HasRecord reports whether the application's record is kept.
func (d Dirs) HasRecord(app string) bool {
	if len(d) == 0 || !validName(app) {
		return false
	}
	_, err := os.Stat(filepath.Join(d[0], app, appRecordName))
	return err == nil
}

// SetRecord keeps the application's record, atomically.
func (d Dirs) SetRecord(app string, r AppRecord) error {
	if len(d) == 0 || !validName(app) {
		return fmt.Errorf("no log dir for %q", app)
	}
	dir := filepath.Join(d[0], app)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("application log folder: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, appRecordName+".*")
	if err != nil {
		return fmt.Errorf("application record: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, appRecordName))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("application record: %w", err)
	}
	return nil
}

// RemoveApplication deletes the application's log folders on the node.
func (d Dirs) RemoveApplication(app string) error {
	if !validName(app) {
		return nil
	}
	var errs []error
	for _, root := range d {
		if err := os.RemoveAll(filepath.Join(root, app)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
