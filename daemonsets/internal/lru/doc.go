// Package lru is the byte-bounded, least-recently-used cache the node's
// shuffle services keep their parsed index files in (the MapReduce
// shuffle's IndexCache, mapreduce.tasktracker.indexcache.mb, and Spark's
// shuffleIndexCache, spark.shuffle.service.index.cache.size).
//
// # Contract
//
// Get returns a key's value, loading it with the caller's function when it
// is not cached. Concurrent Gets of one key run one load and share its
// result, as Hadoop's IndexCache and Guava's LoadingCache do; a waiter
// whose context ends stops waiting. A failed load is returned to every
// waiter and not kept, so the next Get loads again. A value whose size is
// beyond the bound is returned but not kept. RemoveFunc drops entries; a
// load in progress for a dropped key finishes for its waiters but is not
// kept. Values are shared with every caller and must not be modified.
//
// Imports: stdlib only.
package lru
