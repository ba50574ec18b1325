// Package nodes shows Kubernetes nodes to YARN clients: each node becomes a
// NodeReport whose capability is the node's allocatable, whose use is the sum
// of the requests of Knit's pods bound to it, and whose rack is its topology
// zone. A node's YARN node-label partition is its launch.NodeLabelPartition
// label; the running nodes' capability is summed per partition for
// admission.
//
// Info is the node as the ResourceManager's NodeLister returns it
// (rm.NodeInfo is this type); Lister answers it from informer caches, and
// maps between Kubernetes node names and YARN NodeIds for RGS. As all of
// rgs, package nodes never imports rm: the RM declares the small interface
// it lists nodes through. It imports protocols records, rks/launch (the pod
// contract) and client-go.
package nodes
