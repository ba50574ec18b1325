// Package shuffle is knit-node's MapReduce shuffle service, the auxiliary
// service "mapreduce_shuffle": it serves the map outputs that map tasks left
// in the node's local dirs to unmodified Hadoop reducers (Fetcher), answering
// exactly as Hadoop 3.4.1's ShuffleHandler does.
//
// # Wire contract
//
// A reducer sends
//
//	GET /mapOutput?job=<job>&reduce=<r>&map=<attempt>[,<attempt>…][&keepAlive=true]
//	name: mapreduce
//	version: 1.0.0
//	UrlHash: base64(HMAC-SHA1(secret, "<port>/mapOutput?<query>"))
//
// and gets, for each map in request order, a ShuffleHeader Writable (Text map
// id, VLong compressed length, VLong raw length, VInt reduce) followed by that
// partition's bytes of file.out, at the offset file.out.index gives. The
// answer carries ReplyHash (the HMAC of the UrlHash value), the name and
// version headers, Connection and content-length, in that order and case.
// Checks run in ShuffleHandler's order: method (405), name and version (400),
// parameters (400), job token (401), hash (401), then the map outputs (500).
// Every error answer closes the connection. Only one reduce per request is
// accepted, as 3.4.1's handler parses it (Integer.parseInt; no ranges).
//
// The secret of a job is the password of the Token the AM puts in the task
// launch context's service_data["mapreduce_shuffle"]; InitializeApplication
// registers it under job_<cluster ts>_<app seq> with the application's user,
// StopApplication forgets it and the job's index cache entries.
//
// Map outputs are read from
// <local dir>/usercache/<user>/appcache/<application>/output/<attempt>/file.out(.index),
// the first local dir holding each file winning. Map ids must be one path
// element, and files are opened through an os.Root of the job's output
// folder (kept open until the job stops), so no id, ".." or symlink leads
// outside it.
//
// Where Hadoop's answer is an accident of Netty or of an uncaught Java
// exception, the service answers alike but plainly: a request head beyond
// its bounds or not HTTP/1.x gets 400 with an empty body, a body beyond
// 64 KiB 413, a chunked request 400, a bad %-escape 500 with an empty body,
// a negative reduce the "Invalid request" 500 of an out-of-range one, and a
// map id that is not one path element the "Could not find" 500 of a missing
// map. A corrupt index is answered 500 "Checksum error reading spill
// index: <path relative to the local dir>".
//
// # Resources
//
// The service speaks its own minimal HTTP/1.1 (one goroutine per connection,
// bounded request line and headers) so that the header bytes match Hadoop's
// and so that plain-TCP bodies go from the file to the socket with sendfile
// (net.TCPConn.ReadFrom of an io.LimitedReader over an *os.File). Index files
// are cached within a byte bound; connections, files open per request and
// concurrent transfers per reducer are bounded; TLS uses a buffered copy.
//
// Imports: stdlib, hadoopconf, protocols/accept, protocols/token,
// protocols/writable, protocols/yarnid, daemonsets/auxservice and
// daemonsets/internal/lru (the index cache, shared with sparkshuffle).
// See ../shared/docs/hadoop-wire-facts.md §6.1.
package shuffle
