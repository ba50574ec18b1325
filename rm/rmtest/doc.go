// Package rmtest holds in-memory stand-ins for what a ResourceManager is
// built on (its application store, id source and node list), for tests and
// benchmarks that run an rm.ResourceManager without Kubernetes. Production
// code never uses it.
package rmtest
