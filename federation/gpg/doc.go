// Package gpg is knit-gpg's logic, YARN's GlobalPolicyGenerator: a
// Generator that every yarn.federation.gpg.policy.generator.interval
// weighs the active sub-clusters by their load, as LoadBasedGlobalPolicy
// does, and writes each queue's WeightedLocalityPolicyManager policy with
// those weights to the federation store, which the Routers route by.
//
// The load is the clusterMetrics each knit-rm's heartbeat stores as its
// sub-cluster's capability (the RM's /ws/v1/cluster/metrics), read from
// the store rather than asked of every RM again as YARN's GPG does; the
// queues are asked of each RM's REST scheduler (/ws/v1/cluster/scheduler),
// as YARN's GPG asks. The GPG's sub-cluster cleaner is the Router's
// (router.Cleaner), run with the GPG's settings by cmd/knit-gpg.
//
// Imports: federation, federation/store, federation/router (the
// WeightedPolicyInfo format).
package gpg
