// Package sparkshuffle is knit-node's Spark external shuffle service, the
// auxiliary service "spark_shuffle" (YarnShuffleService): Spark executors
// register where they write their shuffle files, and other executors fetch
// blocks from it after the writer is gone. It answers unmodified Spark 3.5
// clients (ExternalBlockStoreClient) as Spark's own ExternalBlockHandler
// over TransportServer does; the recordings in
// ../shared/testdata/spark-shuffle are the reference (replay_test.go).
//
// # Wire contract
//
// Frames are Spark's transport protocol: an int64 length counting itself,
// a message type byte, the type's fields and a body. Requests are
// RpcRequest (a BlockTransferMessage), OneWayMessage, ChunkFetchRequest and
// StreamRequest; the server answers RpcResponse/RpcFailure,
// ChunkFetchSuccess/Failure and StreamResponse/Failure. Served messages:
// RegisterExecutor (empty answer), OpenBlocks and FetchShuffleBlocks
// (single and batch ranges; a StreamHandle, then one chunk per block),
// RemoveBlocks (BlocksRemoved), GetLocalDirsForExecutors
// (LocalDirsForExecutors) and DiagnoseCorruption (CorruptionCause). The
// push-based shuffle messages get what Spark's YARN service answers with
// merging off: "Cannot handle shuffle block merging".
//
// Errors follow Spark's: block problems (unknown executor, missing file,
// reduce out of range) are reported lazily on the chunk, after a
// StreamHandle; a frame that does not parse, an unknown message type, a
// failed auth engine exchange or a body that cannot be sent closes the
// connection. Error texts are the first line of Java's stack trace text
// (exception and message) without the trace.
//
// # Authentication
//
// With Config.Authenticate, the first RPCs of a connection authenticate it
// for one application with that application's secret, which the node
// learns from the spark_shuffle service data (InitializeApplication): SASL
// DIGEST-MD5 as SparkSaslServer does it (protocols/digestmd5; Knit offers
// qop "auth" only, so spark.authenticate.enableSaslEncryption is not
// supported), or with Config.CryptoEnabled the auth engine (X25519, HKDF,
// AES-GCM; versions 1 and 2, not negotiated) after which both directions
// are AES/CTR encrypted, falling back to SASL as Spark does. A connection
// authenticated for one application is refused every message naming
// another, and its streams are its own.
//
// # Files
//
// Blocks are read where Spark's sort shuffle writes them in the executor's
// registered dirs: the file's dir by Java's String.hashCode, then the
// "%02x" sub-dir; shuffle_<s>_<m>_0.data at the offsets its .index gives.
// Unlike Spark, Knit accepts only registered dirs inside the application's
// folder <local dir>/usercache/<user>/appcache/<app> of a node local dir
// (of the application's user, once known) and opens files through an
// os.Root of that folder, so no registration, block id, ".." or symlink
// reaches another application's files or any other file of the node.
// Block bodies go to plain connections with sendfile. Registered executors
// are kept in Config.StateFile and reloaded by New; StopApplication forgets
// an application's secret, executors and cached indexes.
//
// # Resources
//
// One goroutine per connection answers its requests in order; Serve owns
// them and waits for them. Frames are bounded (Config.MaxFrameBytes), so
// are the streams a connection holds open, the chunks the service sends at
// once (spark.shuffle.maxChunksBeingTransferred, beyond which Spark closes
// the connection), index cache bytes, idle connections and stalled writes.
//
// Imports: stdlib, renameio, hadoopconf, daemonsets/auxservice,
// daemonsets/internal/lru (the index cache, shared with shuffle),
// protocols/accept, protocols/digestmd5 and protocols/yarnid.
// See ../shared/docs/hadoop-wire-facts.md §6.2.
package sparkshuffle
