// Package membership is a knit-rm's part in a federation (YARN's
// FederationStateStoreService): the active RM registers its sub-cluster
// in the federation store as SC_NEW with the addresses of its services,
// heartbeats SC_RUNNING and its capability (the cluster metrics JSON)
// every interval, and deregisters it as SC_UNREGISTERED when it stops
// cleanly. An RM that stops heartbeating is marked SC_LOST by the Router
// (federation/router), not here.
//
// Timestamps keeps the RM's cluster timestamp, the first part of its
// application ids, apart from every other member's: the RM picks it
// through them when it first fixes one (the first millisecond from its
// clock on that no other sub-cluster holds, claimed in the store) and
// holds it again on each activation, failing when another sub-cluster
// holds it, before it hands out any id. knit-router picks its own through
// them too, under a claimant id of its own. The registration carries it as
// the sub-cluster's LastStartTime, as YARN's SubClusterInfo carries the
// RM's cluster timestamp.
//
// The member also forgets the homes of the sub-cluster's applications the
// RM no longer holds (its completed applications past
// yarn.resourcemanager.max-completed-applications), as YARN's
// FederationStateStoreService cleans up finished applications, so that the
// store does not grow with every application ever submitted.
//
// Imports: the standard library, federation/store, cenkalti/backoff.
package membership
