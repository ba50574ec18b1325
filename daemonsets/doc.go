// Package daemonsets is the home of knit-node's node services, one
// sub-package each (localizer, logs, shuffle, metrics, webshell, nmrelay),
// and of launcher, the in-pod entrypoint of every task container. They reach
// the ResourceManager only over the wire.
//
// Built so far: launcher, nmrelay, localizer, auxservice, shuffle and logs
// (the NodeManager web port and log aggregation; logs/aggregated holds the
// TFile and Indexed file formats); cmd/knit-node runs all but launcher.
package daemonsets
