package wordcount

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knitdev/knit/examples/mrjob/mapred"
)

// MapOptions are a map task's settings.
type MapOptions struct {
	// Spec is what the AM said: job, attempt and number of partitions.
	Spec TaskSpec
	// Input is the split to read (the localized InputKey link).
	Input string
	// LocalDirs are the application's local dirs ($LOCAL_DIRS:
	// <node local dir>/usercache/<user>/appcache/<application>).
	LocalDirs []string
	// Stdout receives a line about what the map wrote.
	Stdout io.Writer
}

// MapOutputDir is where a map attempt's file.out and file.out.index go
// under one of the application's local dirs (YarnOutputFiles: the
// attempt's output folder, which ShuffleHandler searches for).
func MapOutputDir(localDir, attempt string) string {
	return filepath.Join(localDir, "output", attempt)
}

// RunMap is one map task of WordCount: it counts the words of its split
// (StringTokenizer's delimiters; the combiner summing each word's ones),
// partitions them with HashPartitioner, sorts each partition as Text sorts,
// and writes file.out and file.out.index. It returns the folder it wrote.
func RunMap(opts MapOptions) (string, error) {
	attempt, err := mapred.ParseAttemptID(opts.Spec.Attempt)
	if err != nil {
		return "", fmt.Errorf("map: %w", err)
	}
	if attempt.Task.Type != mapred.Map || opts.Spec.Reduces < 1 {
		return "", fmt.Errorf("map: %s with %d reduces is no map attempt", opts.Spec.Attempt, opts.Spec.Reduces)
	}
	if len(opts.LocalDirs) == 0 {
		return "", errors.New("map: no local dirs (LOCAL_DIRS not set)")
	}
	text, err := os.ReadFile(opts.Input)
	if err != nil {
		return "", fmt.Errorf("map: read split: %w", err)
	}
	words := strings.FieldsFunc(string(text), func(r rune) bool { return strings.ContainsRune(" \t\n\r\f", r) })
	partitions := make([]map[string]int32, opts.Spec.Reduces)
	for i := range partitions {
		partitions[i] = map[string]int32{}
	}
	for _, w := range words {
		partitions[mapred.Partition(w, opts.Spec.Reduces)][w]++
	}
	writers := make([]*mapred.SegmentWriter, len(partitions))
	for p, counts := range partitions {
		writers[p] = &mapred.SegmentWriter{}
		// Go orders strings by their bytes, as Text.Comparator orders keys.
		for _, w := range slices.Sorted(maps.Keys(counts)) {
			writers[p].Append(mapred.AppendText(nil, w), mapred.AppendInt(nil, counts[w]))
		}
	}
	out := mapred.BuildMapOutput(writers)

	// LocalDirAllocator spreads attempts over the dirs; by task index here.
	dir := MapOutputDir(opts.LocalDirs[attempt.Task.Index%len(opts.LocalDirs)], attempt.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("map: %w", err)
	}
	if err := writeFile(filepath.Join(dir, "file.out"), out.File); err != nil {
		return "", fmt.Errorf("map: %w", err)
	}
	if err := writeFile(filepath.Join(dir, "file.out.index"), mapred.MarshalIndex(out.Index)); err != nil {
		return "", fmt.Errorf("map: %w", err)
	}
	fmt.Fprintf(opts.Stdout, "map %s: %d words, %d bytes of output in %d partitions\n", attempt, len(words), len(out.File), len(out.Index))
	return dir, nil
}

// writeFile writes b to path through a temporary file and a rename, so the
// shuffle never sees half a file.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
