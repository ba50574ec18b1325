package aggregated

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is Hadoop's Times.format ("EEE MMM dd HH:mm:ss Z yyyy").
const TimeLayout = "Mon Jan 02 15:04:05 -0700 2006"

// AggregationType is ContainerLogAggregationType as `yarn logs` prints it.
type AggregationType string

const (
	Aggregated AggregationType = "AGGREGATED"
	Local      AggregationType = "LOCAL"
)

// Envelope is the text LogToolUtils wraps around one log file.
type Envelope struct {
	ContainerID string
	// Node is the node as printed after "on": the aggregated file's name
	// ("host_port") for aggregated logs, the NodeId for local ones.
	Node    string
	Type    AggregationType
	Name    string
	Length  int64
	ModTime time.Time
	// Location is the zone times are printed in; nil means time.Local.
	Location *time.Location
}

// Header returns LogToolUtils.formatContainerLogHeader.
func (e Envelope) Header() string {
	loc := e.Location
	if loc == nil {
		loc = time.Local
	}
	on := fmt.Sprintf("Container: %s on %s", e.ContainerID, e.Node)
	var b strings.Builder
	b.WriteString(on + "\n")
	b.WriteString("LogAggregationType: " + string(e.Type) + "\n")
	b.WriteString(strings.Repeat("=", len(on)) + "\n")
	b.WriteString("LogType:" + e.Name + "\n")
	b.WriteString("LogLastModifiedTime:" + e.ModTime.In(loc).Format(TimeLayout) + "\n")
	b.WriteString("LogLength:" + strconv.FormatInt(e.Length, 10) + "\n")
	b.WriteString("LogContents:\n")
	return b.String()
}

// Footer returns the text after an aggregated log's bytes.
func (e Envelope) Footer() string {
	end := "End of LogType:" + e.Name
	return "\n" + end + "\n" + strings.Repeat("*", len(end)+50) + "\n\n"
}

// RunningFooter returns the text after a log of a running container, as
// the NodeManager's web service writes it.
func (e Envelope) RunningFooter() string {
	end := "End of LogType:" + e.Name
	return end + ".This log file belongs to a running container (" + e.ContainerID +
		") and so may not be complete.\n" + strings.Repeat("*", len(end)+50) + "\n\n"
}

// Range returns which bytes of a log of length n the `-size` option (or
// the web service's size parameter) selects: skip bytes, then count bytes.
// size < 0 means the last -size bytes; math.MaxInt64 means all.
func Range(n, size int64) (skip, count int64) {
	if size < 0 {
		abs := -size
		if size == math.MinInt64 || abs >= n {
			return 0, n
		}
		return n - abs, abs
	}
	if size < n {
		return 0, size
	}
	return 0, n
}

// WriteLog writes one log in `yarn logs`' envelope: header, the selected
// bytes of content, footer.
func WriteLog(w io.Writer, e Envelope, size int64, content io.Reader) error {
	if _, err := io.WriteString(w, e.Header()); err != nil {
		return err
	}
	skip, count := Range(e.Length, size)
	if _, err := io.CopyN(io.Discard, content, skip); err != nil {
		return fmt.Errorf("log %s of %s: %w", e.Name, e.ContainerID, noEOF(err))
	}
	if _, err := io.CopyN(w, content, count); err != nil {
		return fmt.Errorf("log %s of %s: %w", e.Name, e.ContainerID, noEOF(err))
	}
	_, err := io.WriteString(w, e.Footer())
	return err
}

// DumpOptions selects what Dump prints, as `yarn logs` options do.
type DumpOptions struct {
	// ContainerID limits the output to one container.
	ContainerID string
	// LogFiles limits the output to these file names; empty or "ALL"
	// means every file.
	LogFiles []string
	// Size is `-size`: 0 means everything (math.MaxInt64).
	Size     int64
	Location *time.Location
}

func (o DumpOptions) wants(f LogFile) bool {
	if o.ContainerID != "" && f.ContainerID != o.ContainerID {
		return false
	}
	return len(o.LogFiles) == 0 || slices.Contains(o.LogFiles, "ALL") || slices.Contains(o.LogFiles, f.Name)
}

// Dump prints every selected log of r, read from the file named nodeFile,
// as `yarn logs` prints aggregated logs. It reports whether any log was
// printed.
func Dump(w io.Writer, r Reader, nodeFile string, o DumpOptions) (bool, error) {
	size := o.Size
	if size == 0 {
		size = math.MaxInt64
	}
	found := false
	err := r.Walk(func(f LogFile, content io.Reader) error {
		if !o.wants(f) {
			return nil
		}
		found = true
		return WriteLog(w, Envelope{
			ContainerID: f.ContainerID, Node: nodeFile, Type: Aggregated, Name: f.Name,
			Length: f.Length, ModTime: f.ModTime, Location: o.Location,
		}, size, content)
	})
	return found, err
}
