// Package rks implements the NodeManager's ContainerManagementProtocol over
// Pods: startContainers patches a container's Pod with its launch context,
// stopContainers ends it, and statuses come from watching Pods. It also owns
// the launch-context encoding shared with knit-node and knit-launcher.
//
// Not built yet: see the issue on RKS and the node services.
package rks
