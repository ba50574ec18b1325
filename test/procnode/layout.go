package procnode

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"k8s.io/apimachinery/pkg/types"
)

// On-disk layout of a node's Dir (see the package doc):
//
//	<Dir>/pods/<namespace>_<name>_<uid>/
//	    _pod.json                       identity and set-up marker
//	    _allocated.json                 resources granted per container (resize.go)
//	    _volumes/<volume>/              emptyDir, secret, configMap, downwardAPI, projected
//	    _work/<container>/              default working directory
//	    _state/<container>/<n>.spec.json    what the shim runs (written by the node)
//	    _state/<container>/<n>.state.json   shim pid, start time (written by the shim)
//	    _state/<container>/<n>.exit.json    exit code, finish time (written by the shim)
//	    _state/<container>/<n>.kill.json    why the node stopped it (written by the node)
//	    _state/<container>/<n>.termination-log
//	    _state/<container>/<n>.shim.log     the shim's own diagnostics
//	    <container>/<n>.log             stdout and stderr of restart n
//
// Namespaces, pod names and container names cannot hold '_', so the folder
// names never collide with the '_'-prefixed entries and split unambiguously.

const podsFolder = "pods"

// PodFolderName is the name of a pod's folder under <Dir>/pods, as
// /var/log/pods names it: <namespace>_<name>_<uid>.
func PodFolderName(namespace, name string, uid types.UID) string {
	return namespace + "_" + name + "_" + string(uid)
}

// LogPath is the file holding stdout and stderr of restart number restart
// of container in the pod whose folder is podFolder (see PodFolderName) on
// the node whose Dir is dir, in the CRI logging format a container runtime
// writes under /var/log/pods (see crilog.go). The file is appended to while
// the container runs and kept until the pod is deleted.
func LogPath(dir, podFolder, container string, restart int) string {
	return filepath.Join(dir, podsFolder, podFolder, container, strconv.Itoa(restart)+".log")
}

// parsePodFolder splits a pod folder name into namespace, name and uid.
func parsePodFolder(name string) (namespace, podName string, uid types.UID, ok bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], types.UID(parts[2]), true
}

// podPaths names the files of one pod.
type podPaths struct {
	root string
}

func newPodPaths(dir, namespace, name string, uid types.UID) podPaths {
	return podPaths{root: filepath.Join(dir, podsFolder, PodFolderName(namespace, name, uid))}
}

func (p podPaths) meta() string                 { return filepath.Join(p.root, "_pod.json") }
func (p podPaths) allocated() string            { return filepath.Join(p.root, "_allocated.json") }
func (p podPaths) volume(name string) string    { return filepath.Join(p.root, "_volumes", name) }
func (p podPaths) work(container string) string { return filepath.Join(p.root, "_work", container) }
func (p podPaths) state(container string) string {
	return filepath.Join(p.root, "_state", container)
}
func (p podPaths) logs(container string) string { return filepath.Join(p.root, container) }

// attemptPaths are the files of one run (restart n) of one container.
type attemptPaths struct {
	Spec, State, Exit, Kill, TermLog, ShimLog, Log string
}

func (p podPaths) attempt(container string, n int) attemptPaths {
	return attemptPathsIn(p.state(container), p.logs(container), n)
}

func attemptPathsIn(stateDir, logDir string, n int) attemptPaths {
	s := filepath.Join(stateDir, strconv.Itoa(n))
	return attemptPaths{
		Spec:    s + ".spec.json",
		State:   s + ".state.json",
		Exit:    s + ".exit.json",
		Kill:    s + ".kill.json",
		TermLog: s + ".termination-log",
		ShimLog: s + ".shim.log",
		Log:     filepath.Join(logDir, strconv.Itoa(n)+".log"),
	}
}

// podMeta is _pod.json: who the folder belongs to, and whether its volumes
// are in place (the "sandbox" is ready).
type podMeta struct {
	Namespace    string    `json:"namespace"`
	Name         string    `json:"name"`
	UID          types.UID `json:"uid"`
	VolumesReady bool      `json:"volumesReady"`
}

// attemptNumbers lists the restarts recorded in a container's state folder,
// ascending.
func attemptNumbers(stateDir string) ([]int, error) {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", stateDir, err)
	}
	var ns []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".spec.json")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(name)
		if err != nil || n < 0 {
			continue
		}
		ns = append(ns, n)
	}
	// ReadDir sorts by name, which puts 10 before 2.
	for i := 1; i < len(ns); i++ {
		for j := i; j > 0 && ns[j] < ns[j-1]; j-- {
			ns[j], ns[j-1] = ns[j-1], ns[j]
		}
	}
	return ns, nil
}

// writeFileAtomic replaces p as a whole, synced to disk, so a reader (this
// node after a restart, or the shim) sees the old content or the new one,
// never a part.
func writeFileAtomic(p string, data []byte, mode fs.FileMode) error {
	if err := renameio.WriteFile(p, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func writeJSONAtomic(p string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p, err)
	}
	return writeFileAtomic(p, data, 0o644)
}

// readJSON decodes p into v; a missing file is (false, nil).
func readJSON(p string, v any) (bool, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", p, err)
	}
	return true, nil
}

// apiTime truncates t to what the API keeps (whole seconds), so a status
// computed here compares equal to the one read back.
func apiTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Second).Local()
}
