package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

const (
	// tailBytes is how much of a container's stderr its diagnostics quote
	// (yarn.nodemanager.container.stderr.tail.bytes).
	tailBytes = 4096
	// maxMessageBytes is the most of a termination message the kubelet
	// keeps.
	maxMessageBytes = 4096

	// Exit codes the NodeManager reads as a kill on request
	// (ContainerExecutor.ExitCode FORCE_KILLED and TERMINATED).
	exitForceKilled = 128 + 9
	exitTerminated  = 128 + 15

	// The files of the log folder the launcher writes the launch script's
	// output to, as the NodeManager's script redirects it there.
	prelaunchOut = "prelaunch.out"
	prelaunchErr = "prelaunch.err"
)

// tail keeps the last n bytes written to it.
type tail struct {
	n   int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// errorFile is what the NodeManager quotes from the container's own error
// log: the newest file of the log folder matching
// yarn.nodemanager.container.stderr.pattern ({*stderr*,*STDERR*}).
type errorFile struct {
	names []string // every match, when there are several
	name  string
	tail  []byte
}

// readErrorFile finds and reads the error file in logDir; nil if there is
// none.
func readErrorFile(logDir string) (*errorFile, error) {
	if logDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(logDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("launcher: read log folder: %w", err)
	}
	var ef errorFile
	var newest os.FileInfo
	for _, e := range entries {
		if e.IsDir() || !strings.Contains(e.Name(), "stderr") && !strings.Contains(e.Name(), "STDERR") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // gone since the listing
		}
		ef.names = append(ef.names, e.Name())
		if newest == nil || info.ModTime().After(newest.ModTime()) {
			newest = info
		}
	}
	if newest == nil {
		return nil, nil
	}
	if len(ef.names) < 2 {
		ef.names = nil
	}
	ef.name = newest.Name()
	f, err := os.Open(filepath.Join(logDir, ef.name))
	if err != nil {
		return nil, fmt.Errorf("launcher: open error file: %w", err)
	}
	defer f.Close()
	if size := newest.Size(); size > tailBytes {
		if _, err := f.Seek(size-tailBytes, io.SeekStart); err != nil {
			return nil, fmt.Errorf("launcher: read error file: %w", err)
		}
	}
	ef.tail, err = io.ReadAll(io.LimitReader(f, tailBytes))
	if err != nil {
		return nil, fmt.Errorf("launcher: read error file: %w", err)
	}
	return &ef, nil
}

// diagnostics is the termination message of a container that exited with
// code, in the NodeManager's words (ContainerExecutor.launchContainer and
// ContainerLaunch.handleContainerExitWithFailure, without the timestamps
// the NodeManager puts before each line): a kill on request gets a short
// note; any other failure quotes the launch script's stderr (what the
// NodeManager's prelaunch.err holds) and the tail of the container's error
// file, cut so the whole stays within maxMessageBytes.
func diagnostics(containerID string, code int, stderr []byte, ef *errorFile) string {
	if code == exitTerminated || code == exitForceKilled {
		return fmt.Sprintf("Container killed on request. Exit code is %d\nContainer exited with a non-zero exit code %d. \n", code, code)
	}
	head := fmt.Sprintf("Exception from container-launch.\nContainer id: %s\nExit code: %d\n\n"+
		"Container exited with a non-zero exit code %d. Error file: %s.\nLast %d bytes of %s :\n",
		containerID, code, code, prelaunchErr, tailBytes, prelaunchErr)
	var mid, end string
	var fileTail []byte
	if ef != nil {
		if len(ef.names) > 0 {
			mid = "Error files: " + strings.Join(ef.names, ", ") + ".\n"
		}
		mid += fmt.Sprintf("Last %d bytes of %s :\n", tailBytes, ef.name)
		fileTail = ef.tail
		end = "\n" + analyse(string(ef.tail))
	}
	sep := ""
	if len(stderr) > 0 && stderr[len(stderr)-1] != '\n' && mid != "" {
		sep = "\n" // YARN glues the next heading to an unfinished last line
	}
	budget := maxMessageBytes - len(head) - len(sep) - len(mid) - len(end)
	a, b := share(len(stderr), len(fileTail), budget)
	msg := head + string(lastBytes(stderr, a)) + sep + mid + string(lastBytes(fileTail, b)) + end
	return string(firstBytes([]byte(msg), maxMessageBytes))
}

// share splits budget bytes between two texts of lengths a and b, giving
// each at least half when both need it.
func share(a, b, budget int) (int, int) {
	budget = max(budget, 0)
	if a+b <= budget {
		return a, b
	}
	half := budget / 2
	switch {
	case a <= half:
		return a, budget - a
	case b <= half:
		return budget - b, b
	}
	return half, budget - half
}

// lastBytes returns at most n bytes from the end of p, starting on a
// character.
func lastBytes(p []byte, n int) []byte {
	if len(p) <= n {
		return p
	}
	p = p[len(p)-n:]
	for len(p) > 0 && !utf8.RuneStart(p[0]) {
		p = p[1:]
	}
	return p
}

// firstBytes returns at most n bytes from the start of p, ending on a
// character.
func firstBytes(p []byte, n int) []byte {
	if len(p) <= n {
		return p
	}
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return p[:n]
}

// analyse adds the NodeManager's hint for a failure it recognises
// (ContainerLaunch.analysesErrorMsgOfContainerExitWithFailure).
func analyse(stderr string) string {
	if !strings.Contains(stderr, "Error: Could not find or load main class org.apache.hadoop.mapreduce") {
		return ""
	}
	var b strings.Builder
	b.WriteString("Please check whether your <HADOOP_HOME>/etc/hadoop/mapred-site.xml contains the below configuration:\n")
	for i, name := range []string{"yarn.app.mapreduce.am.env", "mapreduce.map.env", "mapreduce.reduce.env"} {
		if i > 0 {
			b.WriteString("</property>\n")
		}
		b.WriteString("<property>\n  <name>" + name + "</name>\n  <value>HADOOP_MAPRED_HOME=${full path of your hadoop distribution directory}</value>\n")
	}
	b.WriteString("</property>\n")
	return b.String()
}

// writeTerminationMessage leaves msg for the kubelet, which makes it the
// container status' message, and RKS the container's YARN diagnostics.
func writeTerminationMessage(path, msg string) error {
	if path == "" {
		return nil
	}
	if err := os.WriteFile(path, firstBytes([]byte(msg), maxMessageBytes), 0o644); err != nil {
		return fmt.Errorf("launcher: write termination message: %w", err)
	}
	return nil
}
