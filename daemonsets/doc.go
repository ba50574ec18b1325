// Package daemonsets is the home of knit-node's node services, one
// sub-package each (localizer, logs, shuffle, metrics, webshell, nmrelay),
// and of launcher, the in-pod entrypoint of every task container. They reach
// the ResourceManager only over the wire.
//
// Built so far: launcher (waiting for and running the launch command).
package daemonsets
