// Package wordcount is a MapReduce-shaped YARN application written in Go on
// package client: Hadoop's WordCount example with its own application
// master, map tasks and reduce tasks, speaking to the node's shuffle service
// exactly as MapReduce's tasks do. It exists to prove that a job with
// reducers runs on Knit as it runs on YARN.
//
// The roles, all in one binary (see Main):
//
//   - The client stages nothing: it describes each input file as a file://
//     local resource (one split per file), submits an application whose AM
//     is this binary, follows it to its end and prints the result.
//   - The AM (RunAM) registers, makes the job's shuffle secret (8 random
//     bytes, as JobSubmitter does) and asks for one container per map at
//     priority 20, as MapReduce's RMContainerAllocator asks. Each task's
//     launch context carries the job token as service_data["mapreduce_shuffle"]
//     (ShuffleHandler.serializeServiceData) and the secret in its
//     credentials (secret key "MapReduceShuffleToken", beside the
//     "JobToken"). The shuffle port of each map's node comes from
//     startContainers' services_meta_data. Once every map has succeeded
//     the AM asks for the reducers (priority 10) and hands each the map
//     attempts of every node with that node's host and shuffle port, as
//     the MR AM's task completion events do. A failed attempt runs again
//     up to MaxAttempts; a task out of attempts fails the job, as JobImpl
//     fails it.
//   - A map task (RunMap) counts the words of its split (the combiner
//     applied), partitions them with HashPartitioner, sorts each partition
//     and writes file.out (one IFile segment per partition) and
//     file.out.index under <one of $LOCAL_DIRS>/output/<attempt>/, as
//     MapTask with YarnOutputFiles does.
//   - A reduce task (RunReduce) fetches its partition from every map's node
//     as Fetcher does (UrlHash signed with the secret from its credentials,
//     ReplyHash verified, ShuffleHeader and segment checked), with
//     ShuffleSchedulerImpl's penalties and health check ("Exceeded
//     MAX_FAILED_UNIQUE_FETCHES; bailing-out."), merges, sums, and writes
//     "word<TAB>count" lines to its stdout and, when the job has an output
//     folder, to part-r-<5 digits> there (committed by rename, _SUCCESS
//     written by the AM), as TextOutputFormat and FileOutputCommitter do.
//
// The output folder is a path every node sees (on Knit's local cluster all
// nodes share one file system), as a file:// output of MapReduce's.
//
// Only numbers, addresses and a base64url spec go on command lines, which
// the node's launch script runs inside `bash -c "..."`.
package wordcount
