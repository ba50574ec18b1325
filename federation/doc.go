// Package federation is the room of YARN Federation in Knit: many knit-rm
// sub-clusters behind Routers, sharing one state and policy store, so that
// unchanged clients see one cluster. This package holds the federation's
// yarn-site.xml settings (the Router's and the GPG's), the policy
// managers' and global policies' names, and the machine list that puts
// nodes in sub-clusters for the locality policies; its
// sub-packages the rest:
//
//   - store: the federation state and policy store (YARN's
//     FederationStateStore): sub-cluster membership, each application's
//     home sub-cluster, and the policy of each queue, kept in ConfigMaps of
//     the cluster that hosts the federation, with the Router's read cache
//     (YARN's FederationStateStoreFacade).
//   - membership: a knit-rm's part (YARN's FederationStateStoreService):
//     it registers the active RM's sub-cluster, heartbeats its state and
//     capability, deregisters it on a clean stop, and forgets the homes of
//     the applications the RM no longer holds.
//   - router: knit-router's ApplicationClientProtocol (YARN's
//     FederationClientInterceptor) and the federation calls of its admin
//     protocol (FederationRMAdminInterceptor), its router policies, and the
//     check that marks silent sub-clusters LOST.
//   - gpg: knit-gpg's global policy generator (YARN's
//     GlobalPolicyGenerator with LoadBasedGlobalPolicy): it weighs the
//     active sub-clusters by their pending applications and writes each
//     queue's WeightedLocalityPolicyManager policy to the store.
//
// Imports: protocols, acl, hadoopconf, client-go (tests also the client
// package and test/). Never rm: a sub-cluster RM is reached over the
// wire, and what membership needs of the RM (its capability, whether it
// holds an application) the wiring in cmd/ passes in.
package federation
