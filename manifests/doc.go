// Package manifests holds no code: the folder is Kustomize bases and
// overlays for running Knit on a cluster (see README.md). Its tests render
// every kustomization as `kubectl apply -k` does and check the result
// against the code it deploys: objects decode strictly, the CRD is the one
// knit-rm installs, every flag is one the binaries define, and the RM, the
// nodes, the Services and the RBAC agree with each other, and the plain
// Prometheus scrape configuration scrapes what the pods announce. The
// Grafana dashboards (dashboards/) are checked against the binaries'
// registries in cmd/knit-rm and cmd/knit-node.
//
// The tests may import anything in the module; nothing imports this
// package.
package manifests
