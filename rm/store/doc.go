// Package store keeps the ResourceManager's state in the Kubernetes API, the
// only store Knit has, so that a restarted or newly elected RM rebuilds
// everything from it (docs/architecture.md, "State, recovery and HA").
//
// Three kinds of object live in the RM's namespace:
//
//   - one YarnApplication (CRD yarnapplications.knit.io, see CRD and
//     Store.Install) per application, holding an opaque Record: the RM's own
//     encoding of the application plus the few fields kubectl shows and
//     pruning needs (state, user, queue, finish time);
//   - the ConfigMap knit-rm-cluster: the cluster timestamp, fixed at first
//     start, and the end of the last reserved block of application sequence
//     numbers (Store.NextApplicationIDs, IDs);
//   - the Secret knit-rm-keys: one blob of token master keys (SecretBlob),
//     encoded and decoded by the token package.
//
// Imports: the standard library, client-go (dynamic and typed clients),
// apimachinery, k8s.io/api and cenkalti/backoff. The package knows nothing
// of YARN records beyond application ids and the names of completed states;
// the RM adapts these types to the interfaces it owns.
//
// # Contract
//
// Every call that talks to the API server retries transient failures
// (connection refused or reset, timeouts, 5xx, 429 with its Retry-After,
// etcd leader changes) with exponential backoff until it succeeds, fails
// with a permanent error (invalid, forbidden, not found…), or its context
// ends: an API server outage delays a write, never loses it. A call that
// returns an error may still have taken effect (the answer, not the
// request, may have been lost); every write here is safe to repeat.
//
// The RM is the only writer of these objects. Put therefore resolves a
// resourceVersion conflict by re-reading the object and overwriting it, and
// the RM owns the whole object: labels and annotations added by others are
// not kept. Run a Store only in the leader.
//
// A Store is safe for concurrent use; so are IDs and SecretBlob.
package store
