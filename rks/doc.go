// Package rks implements the NodeManager's ContainerManagementProtocol over
// Pods, for every node at once: knit-node relays each node's NM port here
// (package relay names the node). startContainers checks the NMToken and
// each ContainerToken as a NodeManager does, then puts the launch context
// on the container's pod as an annotation and its credentials in a Secret
// the pod owns (package launch holds that encoding, shared with knit-node
// and knit-launcher); stopContainers and statuses go through RGS, which
// owns the pods and their informer. updateContainer takes a newer version
// of a container (RGS resizes its pod), and a thread dump reaches the
// process as SIGQUIT through its node. The RM launches AM containers
// through Service.Launch too.
//
// Not built yet (answered UnsupportedOperationException):
// re-initialization, restart, rollback, commit and localize.
package rks
