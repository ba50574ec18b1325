// Package daemonsets is the home of knit-node's node services, one
// sub-package each (localizer, logs, shuffle, metrics, webshell, nmrelay),
// and of launcher, the in-pod entrypoint of every task container. They reach
// the ResourceManager only over the wire.
//
// Built so far: launcher, nmrelay and localizer (cmd/knit-node runs the
// last two).
package daemonsets
