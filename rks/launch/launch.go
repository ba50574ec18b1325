// Package launch is the launch-context encoding shared by RKS (which writes
// it on a container's pod), knit-node's localizer (which reads it, fetches
// the local resources and writes the launch files) and knit-launcher (which
// reads the launch files and runs the container's command). It holds plain
// types and their encoding only, so that knit-launcher stays small.
//
// The hand-off, in order:
//
//  1. RKS, on startContainers, annotates the pod with AnnotationContext (a
//     JSON Context) and puts the container's credentials in a Secret named
//     Context.TokensSecret, key SecretKeyTokens, owned by the pod.
//  2. knit-node on the pod's node sees the annotation, localizes, creates
//     the container's work folder with its resource links and token file,
//     and writes Files last, atomically, to FilesPath(launchDir, podUID).
//  3. knit-launcher, PID 1 of the pod since its creation, waits for that
//     file (EnvPodUID names its pod), then runs the command.
package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

const (
	// AnnotationContext holds the JSON Context of a started container.
	AnnotationContext = "knit.io/launch-context"
	// SecretKeyTokens is the key of the credentials (Hadoop's Credentials
	// file format) in a container's tokens Secret.
	SecretKeyTokens = "container_tokens"
	// EnvPodUID is the variable through which knit-launcher learns its
	// pod's UID (a downward-API fieldRef on metadata.uid).
	EnvPodUID = "KNIT_POD_UID"
	// FilesName is the name of the Files document in a pod's launch folder.
	FilesName = "launch.json"
	// TokenFileName is the token file in the work folder
	// (ContainerLaunch.FINAL_CONTAINER_TOKENS_FILE).
	TokenFileName = "container_tokens"
	// MaxContextBytes bounds an encoded Context: an annotation value set
	// stays well under the API server's 256 KiB limit for all annotations.
	MaxContextBytes = 200 << 10
	// MaxFilesBytes bounds an encoded Files document.
	MaxFilesBytes = 1 << 20
)

// Context is what RKS records on a pod at startContainers: who runs what,
// where. The launch context's tokens are not in it (they are in the
// Secret); everything else of the ContainerLaunchContextProto is, encoded
// as protobuf.
type Context struct {
	// ContainerID is the YARN container id string.
	ContainerID string `json:"containerId"`
	// User is the application's submitter, from the ContainerToken.
	User string `json:"user"`
	// NMHost, NMPort and NMHTTPPort are the container's NodeId and web
	// port, as the AM was told them.
	NMHost     string `json:"nmHost"`
	NMPort     int32  `json:"nmPort"`
	NMHTTPPort int32  `json:"nmHttpPort"`
	// LaunchContext is the ContainerLaunchContextProto with tokens cleared.
	LaunchContext []byte `json:"launchContext"`
	// TokensSecret names the Secret with the credentials; empty if none.
	TokensSecret string `json:"tokensSecret,omitempty"`
	// AppSubmitTime (ms) and WebProxyBase are set for AM containers only,
	// as the RM's AMLauncher adds APP_SUBMIT_TIME_ENV and
	// APPLICATION_WEB_PROXY_BASE.
	AppSubmitTime int64  `json:"appSubmitTime,omitempty"`
	WebProxyBase  string `json:"webProxyBase,omitempty"`
	// Image, if set, is the Docker image the launch context asked for
	// (YARN_CONTAINER_RUNTIME_DOCKER_IMAGE), which RKS patched in.
	Image string `json:"image,omitempty"`
	// RunAsUser and RunAsGroup, when the pod's security context sets them,
	// are who the container runs as: knit-node gives them its work and log
	// folders and token file, as the LinuxContainerExecutor gives them to
	// the application's user.
	RunAsUser  *int64 `json:"runAsUser,omitempty"`
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
}

// EncodeContext returns the annotation value of c.
func EncodeContext(c Context) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("launch: encode context: %w", err)
	}
	if len(b) > MaxContextBytes {
		return "", fmt.Errorf("launch: the launch context is %d bytes, more than the %d a pod annotation may carry", len(b), MaxContextBytes)
	}
	return string(b), nil
}

// DecodeContext reads an annotation value written by EncodeContext.
func DecodeContext(s string) (Context, error) {
	var c Context
	if len(s) > MaxContextBytes {
		return c, fmt.Errorf("launch: context of %d bytes is over the limit of %d", len(s), MaxContextBytes)
	}
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("launch: decode context: %w", err)
	}
	if c.ContainerID == "" || c.User == "" {
		return c, errors.New("launch: context without a container id or user")
	}
	return c, nil
}

// EnvVar is one variable of the container's environment, in the order the
// launch context gave them.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Files is what knit-node hands knit-launcher once the work folder is ready:
// the NodeManager's view of the container, and the application's
// environment and commands as given (knit-launcher expands them).
type Files struct {
	ContainerID string `json:"containerId"`
	User        string `json:"user"`
	NMHost      string `json:"nmHost"`
	NMPort      int32  `json:"nmPort"`
	NMHTTPPort  int32  `json:"nmHttpPort"`
	// LocalDirs are <local-dir>/usercache/<user>/appcache/<appId>, one per
	// node local dir; LocalUserDirs <local-dir>/usercache/<user>/.
	LocalDirs     []string `json:"localDirs"`
	LocalUserDirs []string `json:"localUserDirs"`
	// LogDirs are <log-dir>/<appId>/<containerId>, created.
	LogDirs []string `json:"logDirs"`
	// WorkDir is the container's work folder, PWD, holding the resource
	// links, the token file and the tmp folder.
	WorkDir string `json:"workDir"`
	// TokenFile is HADOOP_TOKEN_FILE_LOCATION. knit-node writes one for
	// every container, as the NodeManager does (empty Credentials when
	// the launch context has no tokens); knit-launcher leaves the
	// variable out when this is empty.
	TokenFile string `json:"tokenFile,omitempty"`
	// HomeDir is HOME (yarn.nodemanager.user-home-dir).
	HomeDir string `json:"homeDir"`
	// AppSubmitTime and WebProxyBase: see Context.
	AppSubmitTime int64  `json:"appSubmitTime,omitempty"`
	WebProxyBase  string `json:"webProxyBase,omitempty"`
	// AuxServices maps each aux service to its metadata, exported as
	// NM_AUX_SERVICE_<name> in base64.
	AuxServices map[string][]byte `json:"auxServices,omitempty"`
	// Whitelist holds the node's values for the variables of
	// yarn.nodemanager.env-whitelist, exported only where the application
	// and the image set none.
	Whitelist []EnvVar `json:"whitelist,omitempty"`
	// Env and Commands are the launch context's, unexpanded.
	Env      []EnvVar `json:"env"`
	Commands []string `json:"commands"`
	// LocalizationCounters is YARN's LOCALIZATION_COUNTERS: bytes missed,
	// bytes hit, files missed, files hit, milliseconds.
	LocalizationCounters string `json:"localizationCounters,omitempty"`
	// Failure, if set, is why the container cannot start (a localization
	// error, in YARN's words): knit-launcher reports it and exits with
	// ExitLocalizationFailed without running anything.
	Failure string `json:"failure,omitempty"`
}

// ExitLocalizationFailed is knit-launcher's exit code when Files.Failure is
// set.
const ExitLocalizationFailed = 255

// localizationFailedMark opens the termination message of a container
// knit-node could not prepare. User programs exit 255 too; the mark, which
// only knit-launcher writes, lets RGS report YARN's INVALID exit status
// (-1000), as the NodeManager does for a container whose resources failed.
const localizationFailedMark = "knit-launcher: localization failed\n"

// LocalizationFailureMessage is the termination message knit-launcher
// writes for Files.Failure.
func LocalizationFailureMessage(failure string) string { return localizationFailedMark + failure }

// LocalizationFailure reads back a failure from a container's exit code and
// termination message, as LocalizationFailureMessage wrote it.
func LocalizationFailure(exitCode int32, message string) (string, bool) {
	if exitCode != ExitLocalizationFailed {
		return "", false
	}
	return strings.CutPrefix(message, localizationFailedMark)
}

// Dir is the launch folder under a node root (the folder knit-node shares
// with every pod): knit-node writes there, knit-launcher waits there.
func Dir(nodeRoot string) string { return filepath.Join(nodeRoot, "launch") }

// AnnotationThreadDumps counts the thread dumps asked of a container
// (signalToContainer OUTPUT_THREAD_DUMP): knit-node copies it to
// ThreadDumpsPath, and knit-launcher sends the container SIGQUIT, as the
// NodeManager does, each time it grows.
const AnnotationThreadDumps = "knit.io/thread-dumps"

// ThreadDumpsPath is where knit-node writes a pod's thread dump count.
func ThreadDumpsPath(launchDir, podUID string) string {
	return filepath.Join(launchDir, podUID, "thread-dumps")
}

// FilesPath is where knit-node writes, and knit-launcher waits for, the
// Files of the pod with uid under the launch folder launchDir.
func FilesPath(launchDir, podUID string) string {
	return filepath.Join(launchDir, podUID, FilesName)
}

// EncodeFiles returns the document written to FilesPath.
func EncodeFiles(f Files) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("launch: encode files: %w", err)
	}
	return b, nil
}

// DecodeFiles reads a document written by EncodeFiles.
func DecodeFiles(b []byte) (Files, error) {
	var f Files
	if len(b) > MaxFilesBytes {
		return f, fmt.Errorf("launch: launch files of %d bytes are over the limit of %d", len(b), MaxFilesBytes)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("launch: decode files: %w", err)
	}
	if f.ContainerID == "" || (f.Failure == "" && f.WorkDir == "") {
		return f, errors.New("launch: launch files without a container id or work folder")
	}
	return f, nil
}
