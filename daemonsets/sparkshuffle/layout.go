package sparkshuffle

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"os"
	"path/filepath"
)

// FilePath is where Spark's DiskBlockManager puts the file of name among
// an executor's local dirs (ExecutorDiskUtils.getFilePath).
func FilePath(localDirs []string, subDirsPerLocalDir int, name string) string {
	e := &executor{info: ExecutorShuffleInfo{SubDirsPerLocalDir: int32(subDirsPerLocalDir)}}
	for _, d := range localDirs {
		e.dirs = append(e.dirs, execDir{full: d})
	}
	full, _, _ := e.file(name)
	return full
}

// WriteMapOutput writes one map task's output as Spark's sort shuffle does
// (IndexShuffleBlockResolver): shuffle_<s>_<m>_0.data with the partitions
// concatenated, its .index of offsets and its .checksum.ADLER32. Tests,
// benchmarks and Spark-shaped applications use it to lay out blocks.
func WriteMapOutput(localDirs []string, subDirsPerLocalDir int, shuffleID int32, mapID int64, partitions [][]byte) error {
	base := fmt.Sprintf("shuffle_%d_%d_0", shuffleID, mapID)
	var data, index, sums []byte
	index = binary.BigEndian.AppendUint64(index, 0)
	for _, p := range partitions {
		data = append(data, p...)
		index = binary.BigEndian.AppendUint64(index, uint64(len(data)))
		sums = binary.BigEndian.AppendUint64(sums, uint64(adler32.Checksum(p)))
	}
	for name, b := range map[string][]byte{base + ".data": data, base + ".index": index, base + ".checksum.ADLER32": sums} {
		p := FilePath(localDirs, subDirsPerLocalDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("sparkshuffle: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("sparkshuffle: %w", err)
		}
	}
	return nil
}
