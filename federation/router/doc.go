// Package router is knit-router's logic: ApplicationClientProtocol in
// front of the federation's sub-cluster RMs, as YARN's Router serves it
// with its FederationClientInterceptor, so that unchanged clients see one
// cluster.
//
//   - getNewApplication asks a random active sub-cluster, trying others
//     on failure (yarn.router.submit.retry): ids never collide, as each
//     RM names applications by its own cluster timestamp. knit-router
//     answers it itself once it knows that sub-cluster's maximum
//     capability (asked again after a minute), naming the application
//     under a cluster timestamp it claims in the store as the RMs claim
//     theirs (ids.go): a submission then costs one round trip to a
//     sub-cluster instead of two. The RMs take any id, as YARN's RMs take
//     the ids their Router got from another sub-cluster.
//   - submitApplication picks the home by the queue's router policy (the
//     queue's in the store, else "*"'s, else yarn.federation.policy-manager;
//     the policies of policy.go and policy_managers.go),
//     records it (the first recorded home wins), and submits there; a
//     sub-cluster that fails is blacklisted and the next try moves the
//     home.
//   - calls about one application, attempt or container go to the
//     application's home; an application without one is answered
//     YarnException "Application … does not exist in FederationStateStore.".
//   - getApplications, getClusterMetrics, getClusterNodes, getQueueInfo,
//     getQueueUserAcls, getResourceTypeInfo, the resource profiles, the
//     node labels and the node attributes ask
//     every active sub-cluster at once and merge the answers as
//     RouterYarnClientUtils does; when every sub-cluster refuses with one
//     exception, the Router answers it (YARNFeatureNotEnabledException for
//     profiles, which DistributedShell's client expects).
//   - the reservation calls go as FederationClientInterceptor sends them
//     (reservations.go): a new id from a random active sub-cluster, a
//     submission to the home its queue's policy picks, recorded in the
//     store, an update or a deletion to that home, a list to every active
//     sub-cluster.
//   - the delegation token calls are answered by the Router itself, as
//     YARN's Router answers them with its RouterDelegationTokenSecretManager
//     (delegation.go): RM delegation tokens (RM_DELEGATION_TOKEN, an
//     RMDelegationTokenIdentifier) signed by rm/tokens' Manager, whose keys,
//     live tokens and sequence numbers are the federation store's
//     RouterKeys record (KeyStore), shared by every Router of the
//     federation, so that any Router renews, cancels and accepts a token
//     another issued, and a restarted Router loses none. The rules and
//     messages are the RM's; a caller that authenticated with a token may
//     not ask for, renew or cancel one, and a Router without a secret
//     manager refuses every caller, as YARN's Router refuses one it may not
//     give tokens to. The token's service is the Router's client address.
//     The client port takes these tokens for authentication (SASL
//     DIGEST-MD5, TOKEN), and such a caller is the token's owner.
//   - LocalityRouterPolicy places an AM asked on a node by the machine
//     list (yarn.federation.machine-list, federation.MachineList).
//
// The calls to a sub-cluster run as the Router's caller (SIMPLE auth; a
// caller authenticated by a token is its owner): one connection per
// sub-cluster address and user. Cleaner marks silent
// sub-clusters SC_LOST. Admin is the federation part of the Router's
// admin protocol (YARN's FederationRMAdminInterceptor): queue policies,
// sub-clusters, application homes.
//
// Imports: protocols (ipc, yarnpb, yarnrpc, yarnerr, yarnid, token), acl,
// federation, federation/store and rm/tokens (the delegation token secret
// manager and identifier, which the Router shares with knit-rm).
package router
