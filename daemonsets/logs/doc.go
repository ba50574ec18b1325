// Package logs is knit-node's share of the NodeManager's log features:
//
//   - Server serves the NodeManager web port (8042): the node web services
//     under /ws/v1/node (info, apps, containers, a container's log list
//     and log files) in the NodeManager's JSON (and XML) shapes, and the
//     HTML log pages under /node/containerlogs/<container>/<user> that the
//     RM's UI, Spark and MapReduce link to. Access follows YARN: with
//     yarn.acl.enable the caller (Hadoop pseudo auth, user.name) must be
//     the application's owner, an admin (yarn.admin.acl) or on its
//     VIEW_APP ACL.
//   - Aggregator writes an ended application's container logs to
//     yarn.nodemanager.remote-app-log-dir (a local path, file://, s3a://
//     or s3://) in the TFile or Indexed format (package aggregated), with
//     retries and backoff, and removes the node's copy only once stored;
//     without aggregation it deletes them after
//     yarn.nodemanager.log.retain-seconds. StatusPublisher puts each
//     application's outcome on the Node for the RM's reports.
//   - The log pages of containers whose logs have left the node read the
//     node's aggregated file (Aggregated); `knit logs` (cli/logs) reads the
//     same files and the same web services.
//
// Container logs live in the node's log dirs as
// <log dir>/<application>/<container>/<file> (Dirs). Which containers run
// here comes from the pods bound to the node (PodSource); logs of
// containers whose pods are gone are served while they stay on the node.
// An application's owner and ACLs are kept beside its logs
// (<first log dir>/<application>/.knit-application.json) so both outlive
// the pods.
//
// Imports: the standard library, client-go, echo, rks/launch (the pod
// contract), protocols (ids, records, yarnerr) and hadoopconf.
package logs
