package mapred

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/yarnid"
)

// JobID is a MapReduce job: the YARN application it runs as, printed
// job_<cluster timestamp>_<sequence, at least 4 digits> (JobID.toString,
// TypeConverter.fromYarn).
type JobID struct {
	App yarnid.ApplicationID
}

// String is the job id as MapReduce prints it, e.g. job_1795680442682_0003.
func (j JobID) String() string {
	return "job_" + strconv.FormatInt(j.App.ClusterTimestamp, 10) + "_" + pad(int64(j.App.ID), 4)
}

// TaskType is a task's kind, written as one letter in ids.
type TaskType byte

// The task types of a job with reducers.
const (
	Map    TaskType = 'm'
	Reduce TaskType = 'r'
)

// String is the type's letter.
func (t TaskType) String() string { return string(rune(t)) }

// TaskID is one task of a job: task_<ts>_<seq>_<m|r>_<index, 6 digits>.
type TaskID struct {
	Job   JobID
	Type  TaskType
	Index int
}

// String is the task id as MapReduce prints it.
func (t TaskID) String() string { return "task" + t.suffix() }

func (t TaskID) suffix() string {
	return strings.TrimPrefix(t.Job.String(), "job") + "_" + t.Type.String() + "_" + pad(int64(t.Index), 6)
}

// AttemptID is one attempt of a task: attempt_<ts>_<seq>_<m|r>_<index>_<n>,
// the first attempt being 0. Map outputs live in a folder named by it, and
// reducers ask the shuffle for them by it.
type AttemptID struct {
	Task TaskID
	N    int
}

// String is the attempt id as MapReduce prints it, e.g.
// attempt_1795680442682_0003_m_000000_0.
func (a AttemptID) String() string { return "attempt" + a.Task.suffix() + "_" + strconv.Itoa(a.N) }

// ParseAttemptID reads an attempt id as String writes it.
func ParseAttemptID(s string) (AttemptID, error) {
	parts := strings.Split(s, "_")
	if len(parts) != 6 || parts[0] != "attempt" || len(parts[3]) != 1 {
		return AttemptID{}, fmt.Errorf("mapred: %q is not an attempt id", s)
	}
	app, err := yarnid.ParseApplicationID("application_" + parts[1] + "_" + parts[2])
	if err != nil {
		return AttemptID{}, fmt.Errorf("mapred: attempt id %q: %w", s, err)
	}
	typ := TaskType(parts[3][0])
	if typ != Map && typ != Reduce {
		return AttemptID{}, fmt.Errorf("mapred: attempt id %q: task type %q", s, parts[3])
	}
	index, err1 := strconv.Atoi(parts[4])
	n, err2 := strconv.Atoi(parts[5])
	if err1 != nil || err2 != nil || index < 0 || n < 0 {
		return AttemptID{}, fmt.Errorf("mapred: attempt id %q: bad task or attempt number", s)
	}
	a := AttemptID{Task: TaskID{Job: JobID{App: app}, Type: typ, Index: index}, N: n}
	if a.String() != s {
		return AttemptID{}, fmt.Errorf("mapred: attempt id %q is not in canonical form", s)
	}
	return a, nil
}

// pad prints v with at least width digits, as Java's NumberFormat with
// setMinimumIntegerDigits does.
func pad(v int64, width int) string {
	s := strconv.FormatInt(v, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}
