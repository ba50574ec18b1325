// Package federation is the room of YARN Federation in Knit: many knit-rm
// sub-clusters behind Routers, sharing one state and policy store, so that
// unchanged clients see one cluster.
//
//   - store: the federation state and policy store (YARN's
//     FederationStateStore): sub-cluster membership, each application's
//     home sub-cluster, and the router policy of each queue, kept in
//     ConfigMaps of the cluster that hosts the federation, with the
//     Router's read cache (YARN's FederationStateStoreFacade).
//   - membership: a knit-rm's part (YARN's FederationStateStoreService):
//     it registers the active RM's sub-cluster, heartbeats its state and
//     capability, and deregisters it on a clean stop.
//   - router: knit-router's ApplicationClientProtocol (YARN's
//     FederationClientInterceptor), its router policies, and the check that
//     marks silent sub-clusters LOST.
//
// Imports: protocols, client (to reach the sub-cluster RMs), hadoopconf,
// client-go. Never rm: a sub-cluster RM is reached over the wire, and what
// membership needs of the RM (its capability) the wiring in cmd/ passes in.
package federation
