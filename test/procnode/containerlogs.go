package procnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errBadLogRequest is answered with the kubelet's 400.
var errBadLogRequest = errors.New("bad log request")

// logRequest is a containerLogs query: the PodLogOptions parameters as
// the kubelet decodes them (v1, with the legacy "tail"), checked as the
// API validates them. Unknown parameters are ignored, as a query decoder
// ignores them.
func logRequest(q url.Values) (*corev1.PodLogOptions, error) {
	q = cloneValues(q)
	if tail := q.Get("tail"); tail != "" {
		q["tailLines"] = []string{tail}
		if tail == "all" {
			delete(q, "tailLines")
		}
	}
	opts := &corev1.PodLogOptions{Container: q.Get("container")}
	var errs []error
	boolean := func(name string, dst *bool) {
		if v, ok := lastValue(q, name); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			*dst = b
		}
	}
	integer := func(name string) *int64 {
		v, ok := lastValue(q, name)
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return &n
	}
	boolean("follow", &opts.Follow)
	boolean("previous", &opts.Previous)
	boolean("timestamps", &opts.Timestamps)
	boolean("insecureSkipTLSVerifyBackend", &opts.InsecureSkipTLSVerifyBackend)
	opts.SinceSeconds = integer("sinceSeconds")
	opts.TailLines = integer("tailLines")
	opts.LimitBytes = integer("limitBytes")
	if v, ok := lastValue(q, "sinceTime"); ok {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("sinceTime: %w", err))
		}
		st := metav1.NewTime(t)
		opts.SinceTime = &st
	}
	if v, ok := lastValue(q, "stream"); ok {
		opts.Stream = &v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: unable to decode query: %w", errBadLogRequest, err)
	}
	switch {
	case opts.TailLines != nil && *opts.TailLines < 0:
		return nil, fmt.Errorf("%w: tailLines must be greater than or equal to 0", errBadLogRequest)
	case opts.LimitBytes != nil && *opts.LimitBytes < 1:
		return nil, fmt.Errorf("%w: limitBytes must be greater than 0", errBadLogRequest)
	case opts.SinceSeconds != nil && *opts.SinceSeconds < 1:
		return nil, fmt.Errorf("%w: sinceSeconds must be greater than 0", errBadLogRequest)
	case opts.SinceSeconds != nil && opts.SinceTime != nil:
		return nil, fmt.Errorf("%w: at most one of sinceTime or sinceSeconds may be specified", errBadLogRequest)
	case opts.Stream != nil && *opts.Stream != corev1.LogStreamAll && opts.TailLines != nil:
		return nil, fmt.Errorf("%w: tailLines is not supported when a stream other than All is asked for", errBadLogRequest)
	}
	if opts.Stream != nil {
		switch *opts.Stream {
		case corev1.LogStreamAll, corev1.LogStreamStdout, corev1.LogStreamStderr:
		default:
			return nil, fmt.Errorf("%w: invalid stream type %q", errBadLogRequest, *opts.Stream)
		}
	}
	return opts, nil
}

// lastValue is a parameter's value, the last one where it is repeated, as
// a query decoder reads a scalar.
func lastValue(q url.Values, name string) (string, bool) {
	v := q[name]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// serveContainerLogs answers GET /containerLogs/{ns}/{pod}/{container} as
// the kubelet does: the current run's output (the previous run's with
// previous=true), cut by tailLines, sinceSeconds/sinceTime and limitBytes,
// lines prefixed with their time with timestamps=true, and with follow=true
// kept open, flushed as it grows, until the run ends or the client goes.
func (k *kubeletAPI) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	opts, err := logRequest(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	pod, err := k.findPod(r.PathValue("ns"), r.PathValue("pod"), "")
	if err != nil {
		http.Error(w, fmt.Sprintf("pod %q does not exist", r.PathValue("pod")), http.StatusNotFound)
		return
	}
	container := r.PathValue("container")
	if findContainer(pod, container) == nil {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, pod.Name), http.StatusNotFound)
		return
	}
	a, err := k.logAttempt(pod, container, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(a.Paths.Log)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	out := newLogWriter(w, opts)
	follow := opts.Follow && !opts.Previous
	err = copyLog(r.Context(), f, out, opts, func() bool {
		if !follow {
			return false
		}
		running, err := k.rt.settle(a)
		return err == nil && running
	})
	if err != nil && !errors.Is(err, errLimitReached) && r.Context().Err() == nil {
		k.log.Warn("container log stream failed", "pod", a.Spec.Pod, "container", container, "err", err)
	}
}

// logAttempt is the run whose log is asked for: the latest, or the one
// before it (previous), with the kubelet's messages when there is none.
func (k *kubeletAPI) logAttempt(pod *corev1.Pod, container string, previous bool) (*attempt, error) {
	paths := newPodPaths(k.dir, pod.Namespace, pod.Name, pod.UID)
	nums, err := attemptNumbers(paths.state(container))
	if err != nil {
		return nil, err
	}
	switch {
	case previous && len(nums) < 2:
		return nil, fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
	case len(nums) == 0:
		reason := "ContainerCreating"
		for _, st := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
			if st.Name == container && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
				reason = st.State.Waiting.Reason
			}
		}
		return nil, fmt.Errorf("container %q in pod %q is waiting to start: %s", container, pod.Name, reason)
	}
	n := nums[len(nums)-1]
	if previous {
		n = nums[len(nums)-2]
	}
	return k.rt.load(paths.attempt(container, n))
}

// errLimitReached ends a log copy that wrote limitBytes.
var errLimitReached = errors.New("log limit reached")

// logWriter writes log output to the client, flushing each write, and
// stops at limitBytes as the kubelet's LimitWriter does.
type logWriter struct {
	w     io.Writer
	flush func()
	left  int64 // -1: no limit
}

func newLogWriter(w http.ResponseWriter, opts *corev1.PodLogOptions) *logWriter {
	lw := &logWriter{w: w, flush: func() {}, left: -1}
	if f, ok := w.(http.Flusher); ok {
		lw.flush = f.Flush
	}
	if opts.LimitBytes != nil {
		lw.left = *opts.LimitBytes
	}
	return lw
}

func (l *logWriter) Write(p []byte) (int, error) {
	if l.left == 0 {
		return 0, errLimitReached
	}
	cut := false
	if l.left > 0 && int64(len(p)) > l.left {
		p, cut = p[:l.left], true
	}
	n, err := l.w.Write(p)
	if l.left > 0 {
		l.left -= int64(n)
	}
	l.flush()
	if err == nil && cut {
		err = errLimitReached
	}
	return n, err
}

// copyLog writes the output the CRI log f holds to out as opts ask, as
// the kubelet's ReadLogs does: from the start of its last tailLines
// records, skipping records of another stream or older than
// sinceSeconds/sinceTime, each prefixed with its time when timestamps is
// set; then, while follow says the run still writes, what is appended to
// it. Lines that are no record are skipped, as the kubelet skips them.
func copyLog(ctx context.Context, f *os.File, out io.Writer, opts *corev1.PodLogOptions, follow func() bool) error {
	if opts.TailLines != nil {
		if err := seekTail(f, *opts.TailLines); err != nil {
			return err
		}
	}
	var since time.Time
	switch {
	case opts.SinceTime != nil:
		since = opts.SinceTime.Time
	case opts.SinceSeconds != nil:
		since = time.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}
	stream := "" // all
	if opts.Stream != nil {
		switch *opts.Stream {
		case corev1.LogStreamStdout:
			stream = streamStdout
		case corev1.LogStreamStderr:
			stream = streamStderr
		}
	}
	return followRecords(ctx, f, follow, func(rec criRecord) error {
		if (stream != "" && rec.Stream != stream) || (!since.IsZero() && rec.Time.Before(since)) {
			return nil
		}
		var b []byte
		if opts.Timestamps {
			b = append(rec.Time.AppendFormat(b, criTimeFormat), ' ')
		}
		b = append(b, rec.Content...)
		if !rec.Partial {
			b = append(b, '\n')
		}
		_, err := out.Write(b)
		return err
	})
}

// followPollInterval is how often a followed log is checked for growth.
const followPollInterval = 100 * time.Millisecond

// followRecords hands fn each record of the log f from where it stands;
// at the end it waits for more while follow says the run still writes,
// and stops when it does not (after reading what it wrote last) or ctx
// ends. Lines that are no record are skipped.
func followRecords(ctx context.Context, f *os.File, follow func() bool, fn func(criRecord) error) error {
	each := func(line []byte) error {
		rec, err := parseCRIRecord(line)
		if err != nil {
			return nil
		}
		return fn(rec)
	}
	r := &recordReader{r: bufio.NewReaderSize(f, maxRecordBytes)}
	t := time.NewTicker(followPollInterval)
	defer t.Stop()
	for {
		if err := r.each(each); err != nil {
			return err
		}
		if !follow() {
			return r.each(each) // what the run wrote before it ended
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// maxRecordBytes bounds a record: the shim writes at most maxLogLine bytes
// of content, plus the time, stream and tag; a longer line is no record.
const maxRecordBytes = maxLogLine + 128

// recordReader reads a growing log record by record, keeping a record
// still being written until its newline arrives.
type recordReader struct {
	r       *bufio.Reader
	pending []byte
	skip    bool // dropping an over-long line up to its newline
}

// each hands every complete line read so far (without its newline) to fn.
func (rr *recordReader) each(fn func([]byte) error) error {
	for {
		chunk, err := rr.r.ReadSlice('\n')
		complete := err == nil
		if len(chunk) > 0 && !rr.skip {
			if len(rr.pending)+len(chunk) > maxRecordBytes {
				rr.pending, rr.skip = rr.pending[:0], true
			} else if complete && len(rr.pending) == 0 {
				if ferr := fn(chunk[:len(chunk)-1]); ferr != nil {
					return ferr
				}
			} else {
				rr.pending = append(rr.pending, chunk...)
				if complete {
					line := rr.pending[:len(rr.pending)-1]
					if ferr := fn(line); ferr != nil {
						return ferr
					}
					rr.pending = rr.pending[:0]
				}
			}
		}
		if complete {
			rr.skip = false
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// tailChunk is how much of a log seekTail reads at a time from its end.
const tailChunk = 32 << 10

// seekTail positions f at the start of its last n lines, as the kubelet's
// tail.FindTailLineStartIndex finds them.
func seekTail(f *os.File, n int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pos := st.Size()
	if n == 0 {
		_, err := f.Seek(pos, io.SeekStart)
		return err
	}
	buf := make([]byte, tailChunk)
	newlines := int64(0)
	last := true // the file's last byte is the last line's own newline
	for pos > 0 {
		size := min(int64(len(buf)), pos)
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				last = false
				continue
			}
			if last {
				last = false
				continue
			}
			newlines++
			if newlines == n {
				_, err := f.Seek(pos+i+1, io.SeekStart)
				return err
			}
		}
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}
