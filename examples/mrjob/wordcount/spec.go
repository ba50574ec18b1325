package wordcount

import (
	"fmt"

	"github.com/knitdev/knit/examples/yarnapp"
)

// BinaryKey is the local resource key (the link name in each container's
// working folder) of the mrjob binary.
const BinaryKey = "mrjob"

// InputKey is the link name of a map's split in its working folder.
const InputKey = "input"

// MapReduce's container priorities (RMContainerAllocator).
const (
	PriorityReduce int32 = 10
	PriorityMap    int32 = 20
)

// File is a file the nodes localize from the submitting machine.
type File = yarnapp.File

// JobSpec is what the client tells the AM.
type JobSpec struct {
	// Splits are the input files, one map each.
	Splits []File `json:"splits"`
	// Reduces is the number of reduce tasks (mapreduce.job.reduces).
	Reduces int `json:"reduces"`
	// Binary is the mrjob binary the tasks run.
	Binary File `json:"binary"`
	// Output, if set, is the folder the reducers write part-r-NNNNN to.
	Output string `json:"output,omitempty"`
	// TaskMemoryMB and TaskVcores size each task container.
	TaskMemoryMB int64 `json:"taskMemoryMB"`
	TaskVcores   int32 `json:"taskVcores"`
	// MaxAttempts is the attempts of each task (mapreduce.map.maxattempts,
	// mapreduce.reduce.maxattempts).
	MaxAttempts int `json:"maxAttempts"`
	// ForgeShuffleToken makes the reducers sign their fetches with a secret
	// that is not the job's, to show how a job fails then.
	ForgeShuffleToken bool `json:"forgeShuffleToken,omitempty"`
}

func (s JobSpec) validate() error {
	switch {
	case len(s.Splits) == 0:
		return fmt.Errorf("no input")
	case s.Reduces < 1:
		return fmt.Errorf("%d reduces: the job needs at least one", s.Reduces)
	case s.Binary.Path == "":
		return fmt.Errorf("no binary for the tasks")
	case s.TaskMemoryMB <= 0 || s.TaskVcores <= 0:
		return fmt.Errorf("invalid task resources %d MB, %d vcores", s.TaskMemoryMB, s.TaskVcores)
	case s.MaxAttempts < 1:
		return fmt.Errorf("invalid max attempts %d", s.MaxAttempts)
	}
	return nil
}

// MapHost is one node's map outputs as a reducer fetches them: the host
// and shuffle port, and the map attempts that ran there, in map order.
type MapHost struct {
	Host string   `json:"host"`
	Port int      `json:"port"`
	Maps []string `json:"maps"`
}

// TaskSpec is what the AM tells a task.
type TaskSpec struct {
	// Job is the job id (job_<ts>_<seq>).
	Job string `json:"job"`
	// Attempt is this task attempt's id.
	Attempt string `json:"attempt"`
	// Reduces is the number of partitions a map writes.
	Reduces int `json:"reduces,omitempty"`
	// Hosts are the map outputs a reducer fetches, by node.
	Hosts []MapHost `json:"hosts,omitempty"`
	// Output is the job's output folder, if any.
	Output string `json:"output,omitempty"`
	// ForgeShuffleToken: see JobSpec.
	ForgeShuffleToken bool `json:"forgeShuffleToken,omitempty"`
}

// roleCommand is a container's command: the shipped binary in role with
// its spec, output to the container's log folder (the node replaces
// <LOG_DIR>); extra are more -name=value words of safe characters.
func roleCommand(role, spec, stdout, stderr string, extra ...string) string {
	return yarnapp.Command(BinaryKey, role, spec, stdout, stderr, extra...)
}
