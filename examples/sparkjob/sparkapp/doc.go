// Package sparkapp is a Spark-shaped YARN application written in Go on
// package client: a job of two stages whose shuffle goes through the
// spark_shuffle aux service of each node, with the same messages, file
// layout, service data and authentication as Spark 3.5 on YARN. It exists
// to prove that Spark's external shuffle service on knit-node serves a
// job across nodes as YARN's NodeManagers serve it.
//
// The roles, all in one binary (see Main):
//
//   - The client stages nothing: it submits an application whose AM is
//     this binary (a file:// local resource), with the shuffle service's
//     port as Spark finds it, spark.shuffle.service.port of the YARN
//     configuration ($HADOOP_CONF_DIR/yarn-site.xml) unless given, and
//     follows the application to its end.
//   - The AM (RunAM) makes the application's secret as Spark's
//     SecurityManager does (256 random bits as lowercase hex) and gives
//     every executor container the secret's UTF-8 bytes as
//     service_data["spark_shuffle"] (ExecutorRunnable) and in its
//     credentials under "sparkCookie" (SecurityManager.SECRET_LOOKUP_KEY).
//     It asks for the stage-1 executors; once each has exited 0 it knows,
//     as the MapOutputTracker does, which executor on which host wrote
//     which maps, and asks for the stage-2 executors, each given some
//     reduce partitions and every map status. The job SUCCEEDED once every
//     stage-2 executor has exited 0; any executor that fails fails it.
//   - A stage-1 executor (RunExecutor) makes a blockmgr-<uuid> dir in each
//     of its $LOCAL_DIRS (DiskBlockManager), writes its maps' output there
//     as the sort shuffle does (shuffle_<s>_<m>_0.data, .index and
//     .checksum.ADLER32 in the hashed sub-dirs), registers with the
//     service on its node ($NM_HOST) with RegisterExecutor, and exits.
//   - A stage-2 executor fetches its partitions of every map from the
//     service on each writer's node with FetchShuffleBlocks (or OpenBlocks
//     with -old_fetch_protocol), authenticated by SASL DIGEST-MD5 with the
//     secret from its credentials, and checks every block's bytes; block
//     contents are a function of (shuffle, map, reduce), so nothing but
//     the shuffle carries them. With -wrong_secret its connections use a
//     secret not the application's, the service refuses them, and the job
//     fails.
//
// Only numbers, addresses and a base64url spec go on command lines, which
// the node's launch script runs inside `bash -c "..."`.
package sparkapp
