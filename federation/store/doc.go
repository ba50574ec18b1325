// Package store is the federation state and policy store: YARN's
// FederationStateStore (FederationMembershipStateStore,
// FederationApplicationHomeSubClusterStore, FederationPolicyStore) with the
// semantics of YARN's implementations, behind the StateStore interface so
// that other backends can be added.
//
// Kube keeps the store in ConfigMaps of one namespace of the cluster that
// hosts the federation: one per sub-cluster, one per application home, one
// per queue policy, each labelled with its kind. Writes that race resolve as
// YARN's stores do: the first application home written wins (a create that
// finds the object answers the stored home), and read-modify-writes
// (heartbeats, deregistrations, home updates) use resourceVersion and retry
// on a conflict. Each API call is tried again, for a few seconds, when it
// fails for a passing reason (an unreachable or overloaded API server).
// A claimed cluster timestamp (ClusterTimestamps) is a ConfigMap named
// after it, created once: of two claims the first created holds.
// The Routers' delegation token state (RouterKeys) is a keys record (master
// keys, current key id, sequence number) in a Secret rather than a
// ConfigMap since it holds master keys, and a ConfigMap per live token
// (its identifier and renew date; no secret), so that no one object's size
// bounds the live tokens; a write names the version it replaces (a
// deletion, as a precondition) and fails with ErrConflict when another
// Router wrote first.
// Memory is the same contract in a map, for tests of the store's users.
//
// Cache is the Router's view (YARN's FederationStateStoreFacade): reads of
// sub-clusters, policies and application homes are kept for
// yarn.federation.cache-ttl.secs; writes go through and update it.
//
// Imports: the standard library, client-go and apimachinery.
package store
