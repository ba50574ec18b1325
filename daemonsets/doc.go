// Package daemonsets is the home of knit-node's node services, one
// sub-package each (localizer, logs, shuffle, metrics, webshell, nmrelay),
// and of launcher, the in-pod entrypoint of every task container. They reach
// the ResourceManager only over the wire.
//
// Not built yet: see the issue on RKS and the node services.
package daemonsets
