package sparkshuffle

import (
	"encoding/binary"
	"fmt"
)

// BlockTransferMessage type codes (network-shuffle
// BlockTransferMessage.Type, Spark 3.5).
const (
	msgOpenBlocks               int8 = 0
	msgUploadBlock              int8 = 1
	msgRegisterExecutor         int8 = 2
	msgStreamHandle             int8 = 3
	msgRegisterDriver           int8 = 4
	msgShuffleServiceHeartbeat  int8 = 5
	msgUploadBlockStream        int8 = 6
	msgRemoveBlocks             int8 = 7
	msgBlocksRemoved            int8 = 8
	msgFetchShuffleBlocks       int8 = 9
	msgGetLocalDirsForExecutors int8 = 10
	msgLocalDirsForExecutors    int8 = 11
	msgPushBlockStream          int8 = 12
	msgFinalizeShuffleMerge     int8 = 13
	msgMergeStatuses            int8 = 14
	msgFetchShuffleBlockChunks  int8 = 15
	msgDiagnoseCorruption       int8 = 16
	msgCorruptionCause          int8 = 17
	msgBlockPushReturnCode      int8 = 18
	msgRemoveShuffleMerge       int8 = 19
)

// msgName names a type the service decodes but does not serve, for the
// "Unexpected message" answer.
func msgName(t int8) string {
	switch t {
	case msgUploadBlock:
		return "UploadBlock"
	case msgStreamHandle:
		return "StreamHandle"
	case msgRegisterDriver:
		return "RegisterDriver"
	case msgShuffleServiceHeartbeat:
		return "ShuffleServiceHeartbeat"
	case msgUploadBlockStream:
		return "UploadBlockStream"
	case msgBlocksRemoved:
		return "BlocksRemoved"
	case msgLocalDirsForExecutors:
		return "LocalDirsForExecutors"
	case msgPushBlockStream:
		return "PushBlockStream"
	case msgMergeStatuses:
		return "MergeStatuses"
	case msgCorruptionCause:
		return "CorruptionCause"
	case msgBlockPushReturnCode:
		return "BlockPushReturnCode"
	}
	return fmt.Sprintf("type %d", t)
}

// ExecutorShuffleInfo is where an executor's shuffle files are:
// RegisterExecutor's executorInfo.
type ExecutorShuffleInfo struct {
	LocalDirs          []string `json:"localDirs"`
	SubDirsPerLocalDir int32    `json:"subDirsPerLocalDir"`
	ShuffleManager     string   `json:"shuffleManager"`
}

// RegisterExecutor tells the service where an executor writes its shuffle
// files; it is answered with an empty RpcResponse.
type RegisterExecutor struct {
	AppID, ExecID string
	Info          ExecutorShuffleInfo
}

// OpenBlocks asks for blocks by id (shuffle_<s>_<m>_<r> or rdd_<r>_<split>);
// Spark's old fetch protocol. Answered with a StreamHandle.
type OpenBlocks struct {
	AppID, ExecID string
	BlockIDs      []string
}

// FetchShuffleBlocks asks for the blocks of one shuffle, grouped by map; with
// BatchFetch each ReduceIDs entry is a [start, end) range. Answered with a
// StreamHandle.
type FetchShuffleBlocks struct {
	AppID, ExecID string
	ShuffleID     int32
	MapIDs        []int64
	ReduceIDs     [][]int32
	BatchFetch    bool
}

// StreamHandle answers OpenBlocks and FetchShuffleBlocks: the stream to fetch
// chunks of and how many there are.
type StreamHandle struct {
	StreamID  int64
	NumChunks int32
}

// RemoveBlocks deletes block files (rdd blocks, a shuffle's files) of an
// executor; answered with BlocksRemoved.
type RemoveBlocks struct {
	AppID, ExecID string
	BlockIDs      []string
}

// BlocksRemoved counts the files RemoveBlocks deleted.
type BlocksRemoved struct{ NumRemoved int32 }

// GetLocalDirsForExecutors asks for executors' local dirs (host-local
// reads); answered with LocalDirsForExecutors.
type GetLocalDirsForExecutors struct {
	AppID   string
	ExecIDs []string
}

// LocalDirsForExecutors lists each executor's local dirs, flattened.
type LocalDirsForExecutors struct {
	ExecIDs   []string
	NumDirs   []int32
	LocalDirs []string
}

// FetchShuffleBlockChunks asks for chunks of merged shuffle blocks
// (push-based shuffle).
type FetchShuffleBlockChunks struct {
	AppID, ExecID  string
	ShuffleID      int32
	ShuffleMergeID int32
	ReduceIDs      []int32
	ChunkIDs       [][]int32
}

// mergeMessage is FinalizeShuffleMerge or RemoveShuffleMerge: push-based
// shuffle calls, refused with merging off.
type mergeMessage struct {
	typ       int8
	AppID     string
	AttemptID int32
	ShuffleID int32
	MergeID   int32
}

// pushBlockStream is the meta of an UploadStream: a pushed block.
type pushBlockStream struct {
	AppID string
}

// DiagnoseCorruption asks why a fetched block failed its checksum;
// answered with CorruptionCause.
type DiagnoseCorruption struct {
	AppID, ExecID string
	ShuffleID     int32
	MapID         int64
	ReduceID      int32
	Checksum      int64
	Algorithm     string
}

// Causes of a corrupt block (network-common ShuffleChecksumHelper Cause).
const (
	CauseDiskIssue                    int8 = 0
	CauseNetworkIssue                 int8 = 1
	CauseUnknownIssue                 int8 = 2
	CauseChecksumVerifyPass           int8 = 3
	CauseUnsupportedChecksumAlgorithm int8 = 4
)

// CorruptionCause answers DiagnoseCorruption.
type CorruptionCause struct{ Cause int8 }

// unservedMessage is a type the service decodes no further.
type unservedMessage struct{ typ int8 }

// decodeMessage decodes a BlockTransferMessage as
// BlockTransferMessage.Decoder.fromByteBuffer does, failing with Java's
// exception text for an unknown type or fields that do not fit. The result
// is one of the message types above, by pointer.
func decodeMessage(b []byte) (any, error) {
	r := &javaBuf{b: b}
	t, err := r.byte()
	if err != nil {
		return nil, err
	}
	typ := int8(t)
	switch typ {
	case msgOpenBlocks, msgRemoveBlocks:
		app, exec, err := r.appExec()
		if err != nil {
			return nil, err
		}
		ids, err := r.strs()
		if err != nil {
			return nil, err
		}
		if typ == msgOpenBlocks {
			return &OpenBlocks{AppID: app, ExecID: exec, BlockIDs: ids}, nil
		}
		return &RemoveBlocks{AppID: app, ExecID: exec, BlockIDs: ids}, nil
	case msgRegisterExecutor:
		app, exec, err := r.appExec()
		if err != nil {
			return nil, err
		}
		m := &RegisterExecutor{AppID: app, ExecID: exec}
		if m.Info.LocalDirs, err = r.strs(); err != nil {
			return nil, err
		}
		if m.Info.SubDirsPerLocalDir, err = r.int(); err != nil {
			return nil, err
		}
		if m.Info.ShuffleManager, err = r.str(); err != nil {
			return nil, err
		}
		return m, nil
	case msgStreamHandle:
		m := &StreamHandle{}
		if m.StreamID, err = r.long(); err != nil {
			return nil, err
		}
		if m.NumChunks, err = r.int(); err != nil {
			return nil, err
		}
		return m, nil
	case msgBlocksRemoved:
		n, err := r.int()
		if err != nil {
			return nil, err
		}
		return &BlocksRemoved{NumRemoved: n}, nil
	case msgFetchShuffleBlocks:
		app, exec, err := r.appExec()
		if err != nil {
			return nil, err
		}
		m := &FetchShuffleBlocks{AppID: app, ExecID: exec}
		if m.ShuffleID, err = r.int(); err != nil {
			return nil, err
		}
		if m.MapIDs, err = r.longs(); err != nil {
			return nil, err
		}
		if m.ReduceIDs, err = r.intArrays(); err != nil {
			return nil, err
		}
		if m.BatchFetch, err = r.bool(); err != nil {
			return nil, err
		}
		return m, nil
	case msgGetLocalDirsForExecutors:
		m := &GetLocalDirsForExecutors{}
		if m.AppID, err = r.str(); err != nil {
			return nil, err
		}
		if m.ExecIDs, err = r.strs(); err != nil {
			return nil, err
		}
		return m, nil
	case msgLocalDirsForExecutors:
		m := &LocalDirsForExecutors{}
		if m.ExecIDs, err = r.strs(); err != nil {
			return nil, err
		}
		if m.NumDirs, err = r.ints(); err != nil {
			return nil, err
		}
		if m.LocalDirs, err = r.strs(); err != nil {
			return nil, err
		}
		return m, nil
	case msgPushBlockStream:
		m := &pushBlockStream{}
		if m.AppID, err = r.str(); err != nil {
			return nil, err
		}
		for range 6 { // attempt, shuffle, merge id, map index, reduce, index
			if _, err := r.int(); err != nil {
				return nil, err
			}
		}
		return m, nil
	case msgFinalizeShuffleMerge, msgRemoveShuffleMerge:
		m := &mergeMessage{typ: typ}
		if m.AppID, err = r.str(); err != nil {
			return nil, err
		}
		for _, p := range []*int32{&m.AttemptID, &m.ShuffleID, &m.MergeID} {
			if *p, err = r.int(); err != nil {
				return nil, err
			}
		}
		return m, nil
	case msgFetchShuffleBlockChunks:
		app, exec, err := r.appExec()
		if err != nil {
			return nil, err
		}
		m := &FetchShuffleBlockChunks{AppID: app, ExecID: exec}
		if m.ShuffleID, err = r.int(); err != nil {
			return nil, err
		}
		if m.ShuffleMergeID, err = r.int(); err != nil {
			return nil, err
		}
		if m.ReduceIDs, err = r.ints(); err != nil {
			return nil, err
		}
		if m.ChunkIDs, err = r.intArrays(); err != nil {
			return nil, err
		}
		return m, nil
	case msgDiagnoseCorruption:
		app, exec, err := r.appExec()
		if err != nil {
			return nil, err
		}
		m := &DiagnoseCorruption{AppID: app, ExecID: exec}
		if m.ShuffleID, err = r.int(); err != nil {
			return nil, err
		}
		if m.MapID, err = r.long(); err != nil {
			return nil, err
		}
		if m.ReduceID, err = r.int(); err != nil {
			return nil, err
		}
		if m.Checksum, err = r.long(); err != nil {
			return nil, err
		}
		if m.Algorithm, err = r.str(); err != nil {
			return nil, err
		}
		return m, nil
	case msgCorruptionCause:
		c, err := r.byte()
		if err != nil {
			return nil, err
		}
		return &CorruptionCause{Cause: int8(c)}, nil
	case msgUploadBlock, msgRegisterDriver, msgShuffleServiceHeartbeat, msgUploadBlockStream,
		msgMergeStatuses, msgBlockPushReturnCode:
		return &unservedMessage{typ: typ}, nil
	}
	return nil, illegalArgument(fmt.Sprintf("Unknown message type: %d", typ))
}

func (r *javaBuf) appExec() (string, string, error) {
	app, err := r.str()
	if err != nil {
		return "", "", err
	}
	exec, err := r.str()
	return app, exec, err
}

func (r *javaBuf) intArrays() ([][]int32, error) {
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	var out [][]int32
	for range n {
		a, err := r.ints()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// encodeMessage encodes a BlockTransferMessage (the types above, by
// pointer) as Spark's toByteBuffer does.
func encodeMessage(m any) []byte {
	var b []byte
	switch m := m.(type) {
	case *OpenBlocks:
		b = append(b, byte(msgOpenBlocks))
		b = appendString(appendString(b, m.AppID), m.ExecID)
		b = appendStrings(b, m.BlockIDs)
	case *RemoveBlocks:
		b = append(b, byte(msgRemoveBlocks))
		b = appendString(appendString(b, m.AppID), m.ExecID)
		b = appendStrings(b, m.BlockIDs)
	case *RegisterExecutor:
		b = append(b, byte(msgRegisterExecutor))
		b = appendString(appendString(b, m.AppID), m.ExecID)
		b = appendStrings(b, m.Info.LocalDirs)
		b = binary.BigEndian.AppendUint32(b, uint32(m.Info.SubDirsPerLocalDir))
		b = appendString(b, m.Info.ShuffleManager)
	case *StreamHandle:
		b = append(b, byte(msgStreamHandle))
		b = binary.BigEndian.AppendUint64(b, uint64(m.StreamID))
		b = binary.BigEndian.AppendUint32(b, uint32(m.NumChunks))
	case *BlocksRemoved:
		b = append(b, byte(msgBlocksRemoved))
		b = binary.BigEndian.AppendUint32(b, uint32(m.NumRemoved))
	case *FetchShuffleBlocks:
		b = append(b, byte(msgFetchShuffleBlocks))
		b = appendString(appendString(b, m.AppID), m.ExecID)
		b = binary.BigEndian.AppendUint32(b, uint32(m.ShuffleID))
		b = appendLongs(b, m.MapIDs)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.ReduceIDs)))
		for _, r := range m.ReduceIDs {
			b = appendInts(b, r)
		}
		if m.BatchFetch {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	case *GetLocalDirsForExecutors:
		b = append(b, byte(msgGetLocalDirsForExecutors))
		b = appendStrings(appendString(b, m.AppID), m.ExecIDs)
	case *LocalDirsForExecutors:
		b = append(b, byte(msgLocalDirsForExecutors))
		b = appendStrings(b, m.ExecIDs)
		b = appendInts(b, m.NumDirs)
		b = appendStrings(b, m.LocalDirs)
	case *FetchShuffleBlockChunks:
		b = append(b, byte(msgFetchShuffleBlockChunks))
		b = appendString(appendString(b, m.AppID), m.ExecID)
		b = binary.BigEndian.AppendUint32(b, uint32(m.ShuffleID))
		b = binary.BigEndian.AppendUint32(b, uint32(m.ShuffleMergeID))
		b = appendInts(b, m.ReduceIDs)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.ChunkIDs)))
		for _, c := range m.ChunkIDs {
			b = appendInts(b, c)
		}
	case *DiagnoseCorruption:
		b = append(b, byte(msgDiagnoseCorruption))
		b = appendString(appendString(b, m.AppID), m.ExecID)
		b = binary.BigEndian.AppendUint32(b, uint32(m.ShuffleID))
		b = binary.BigEndian.AppendUint64(b, uint64(m.MapID))
		b = binary.BigEndian.AppendUint32(b, uint32(m.ReduceID))
		b = binary.BigEndian.AppendUint64(b, uint64(m.Checksum))
		b = appendString(b, m.Algorithm)
	case *CorruptionCause:
		b = append(b, byte(msgCorruptionCause), byte(m.Cause))
	case *mergeMessage:
		b = append(b, byte(m.typ))
		b = appendString(b, m.AppID)
		for _, v := range []int32{m.AttemptID, m.ShuffleID, m.MergeID} {
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
	default:
		panic(fmt.Sprintf("sparkshuffle: cannot encode %T", m))
	}
	return b
}
