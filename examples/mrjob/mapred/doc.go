// Package mapred holds the bytes MapReduce's map side writes and its shuffle
// moves, as Hadoop 3.4.1 writes them (the Java classes live in Hadoop's
// org.apache.hadoop.mapred and mapreduce.task.reduce packages, hence the
// name):
//
//   - IFile segments (IFile.Writer over IFileOutputStream): per record a
//     VInt key length, a VInt value length, the key and the value bytes;
//     then the EOF marker (two VInt -1) and a 4-byte big-endian CRC32 of
//     everything before it. A map's file.out is one segment per partition.
//   - The spill index file.out.index (SpillRecord): per partition three
//     big-endian int64 (start offset, raw length, part length), then an
//     8-byte CRC32 of those bytes.
//   - The shuffle's HTTP exchange (ShuffleHandler and Fetcher): the request
//     URL, the UrlHash and ReplyHash headers (HMAC-SHA1 with the job's
//     shuffle secret, SecureShuffleUtils), and the ShuffleHeader that
//     precedes each map's segment in the response body.
//   - The job token the AM puts in each task's service_data
//     ("mapreduce_shuffle", ShuffleHandler.serializeServiceData) and the
//     shuffle port the node answers in services_meta_data.
//   - Job, task and attempt ids (job_<ts>_<seq>, attempt_<ts>_<seq>_m_<task>_<n>),
//     Text keys, IntWritable values and HashPartitioner.
//
// Everything is checked against the recordings of a real ShuffleHandler and
// its reducers in ../shared/testdata/hadoop-shuffle. Decoders never trust a
// length they read: they bound it and fail with an error, never a panic.
//
// Imports: stdlib, protocols/writable, protocols/token and protocols/yarnid.
// See docs/hadoop-wire-facts.md §6.1.
package mapred
