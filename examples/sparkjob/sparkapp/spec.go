package sparkapp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/knitdev/knit/examples/yarnapp"
)

// BinaryKey is the local resource key (the link name in each container's
// working folder) of the sparkjob binary.
const BinaryKey = "sparkjob"

// Spark's names and defaults.
const (
	// ServiceName is spark.shuffle.service.name's default.
	ServiceName = "spark_shuffle"
	// SecretAlias is the credentials key of the application's secret
	// (SecurityManager.SECRET_LOOKUP_KEY).
	SecretAlias = "sparkCookie"
	// SubDirsPerLocalDir is spark.diskStore.subDirectories' default.
	SubDirsPerLocalDir = 64
	// ShuffleManager is the sort shuffle's class, registered with the service.
	ShuffleManager = "org.apache.spark.shuffle.sort.SortShuffleManager"
	// WrongSecret is what -wrong_secret executors authenticate with.
	WrongSecret = "0000wrongsecret0000"
)

// Container priorities of the two stages' executors.
const (
	PriorityStage1 int32 = 1
	PriorityStage2 int32 = 2
)

// JobSpec is what the client tells the AM.
type JobSpec struct {
	// Binary is the sparkjob binary the executors run.
	Binary yarnapp.File `json:"binary"`
	// Executors is the number of executors of each stage.
	Executors int `json:"executors"`
	// MapsPerExecutor is the map tasks each stage-1 executor runs.
	MapsPerExecutor int `json:"mapsPerExecutor"`
	// Partitions is the shuffle's number of reduce partitions.
	Partitions int `json:"partitions"`
	// BlockBytes is about the size of each block.
	BlockBytes int `json:"blockBytes"`
	// ShufflePort is spark.shuffle.service.port.
	ShufflePort int `json:"shufflePort"`
	// OldFetchProtocol fetches with OpenBlocks
	// (spark.shuffle.useOldFetchProtocol) instead of FetchShuffleBlocks.
	OldFetchProtocol bool `json:"oldFetchProtocol,omitempty"`
	// WrongSecret makes the stage-2 executors authenticate with a secret
	// that is not the application's.
	WrongSecret bool `json:"wrongSecret,omitempty"`
	// ExecutorMemoryMB sizes each executor container.
	ExecutorMemoryMB int64 `json:"executorMemoryMB"`
}

func (s JobSpec) validate() error {
	switch {
	case s.Executors < 1:
		return fmt.Errorf("%d executors: the job needs at least one", s.Executors)
	case s.MapsPerExecutor < 1 || s.Partitions < 1 || s.BlockBytes < 1:
		return fmt.Errorf("invalid shuffle: %d maps per executor, %d partitions, %d-byte blocks", s.MapsPerExecutor, s.Partitions, s.BlockBytes)
	case s.Binary.Path == "":
		return fmt.Errorf("no binary for the executors")
	case s.ShufflePort <= 0 || s.ShufflePort > 65535:
		return fmt.Errorf("invalid shuffle service port %d", s.ShufflePort)
	case s.ExecutorMemoryMB <= 0:
		return fmt.Errorf("invalid executor memory %d MB", s.ExecutorMemoryMB)
	}
	return nil
}

// MapStatus is where one executor's map output is, as Spark's
// MapOutputTracker tells reducers: the executor, its host (the shuffle
// service's there) and its maps.
type MapStatus struct {
	ExecID string  `json:"exec"`
	Host   string  `json:"host"`
	MapIDs []int64 `json:"maps"`
}

// ExecutorSpec is what the AM tells an executor.
type ExecutorSpec struct {
	// App is the application id, Spark's spark.app.id on YARN.
	App string `json:"app"`
	// ExecID is the executor's id.
	ExecID string `json:"exec"`
	// Stage is 1 (write map output) or 2 (fetch it).
	Stage int `json:"stage"`
	// ShufflePort is spark.shuffle.service.port.
	ShufflePort int `json:"shufflePort"`
	// ShuffleID is the shuffle written and read.
	ShuffleID int32 `json:"shuffle"`
	// MapIDs are the maps a stage-1 executor writes; Partitions and
	// BlockBytes shape their output.
	MapIDs     []int64 `json:"maps,omitempty"`
	Partitions int     `json:"partitions,omitempty"`
	BlockBytes int     `json:"blockBytes,omitempty"`
	// Reduces are the partitions a stage-2 executor fetches from every
	// map of Writers.
	Reduces []int32     `json:"reduces,omitempty"`
	Writers []MapStatus `json:"writers,omitempty"`
	// OldFetchProtocol and WrongSecret: see JobSpec.
	OldFetchProtocol bool `json:"oldFetchProtocol,omitempty"`
	WrongSecret      bool `json:"wrongSecret,omitempty"`
}

// Block is the content of block (shuffle, map, reduce): its name, then
// bytes of a generator seeded by the three, about size bytes in all, so a
// reader checks a block without any other copy of it.
func Block(shuffle int32, mapID int64, reduce int32, size int) []byte {
	b := fmt.Appendf(nil, "shuffle_%d_%d_%d|", shuffle, mapID, reduce)
	name := len(b)
	n := max(name, size/2+int((uint64(mapID)*7+uint64(reduce)*13)%uint64(size)))
	rng := rand.New(rand.NewPCG(uint64(shuffle)<<32|uint64(reduce), uint64(mapID)))
	for len(b) < n {
		b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
	}
	return b[:n]
}

func roleCommand(role, spec, stdout, stderr string, extra ...string) string {
	return yarnapp.Command(BinaryKey, role, spec, stdout, stderr, extra...)
}
