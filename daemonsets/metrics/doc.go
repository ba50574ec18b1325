// Package metrics measures the containers that run on a node for knit-node's
// Prometheus /metrics, as a NodeManager's ContainersMonitor does: CPU time,
// memory (RSS, and page cache where a cgroup tells it) and disk IO, labelled
// with each container's application, container id, queue and user.
//
// A container is measured where the node has it:
//
//   - cgroup v2 (real nodes): the pod's cgroup that the kubelet made under
//     kubepods (systemd or cgroupfs driver, any QoS class): cpu.stat
//     usage_usec, memory.stat anon and file, io.stat rbytes and wbytes.
//   - /proc (process nodes, where a container is a process tree on the
//     machine): the processes whose environment holds the container's
//     CONTAINER_ID, which knit-launcher's launch script exports to
//     everything it runs; their utime, stime and the times of the children
//     they reaped (/proc/<pid>/stat), their resident pages (statm) and
//     their read and write bytes (/proc/<pid>/io, where readable).
//
// Each scrape reads the files anew (a Collector keeps no samples), once for
// all containers. The registry is the caller's.
//
// A Publisher turns the same measurements, and the machine's /proc/meminfo
// and /proc/stat, into the figures a NodeManager's NodeResourceMonitor and
// ContainersMonitor send the RM (YARN's ResourceUtilization of the node
// and of its containers) with the machine's physical memory and processors
// (the NodeManager's physicalResource), and publishes them on the node's Node
// (launch.AnnotationUtilization) every interval, only when they moved
// beyond a threshold, for the RM's node reports.
//
// Imports: the standard library, prometheus/client_golang, client-go,
// rks/launch (the pod labels and the Node annotation) and
// daemonsets/auxservice (the Node annotation write).
package metrics
