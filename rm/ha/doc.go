// Package ha makes ResourceManager replicas one active and the rest standby,
// as YARN's RM HA with automatic failover does, with a coordination.k8s.io
// Lease in place of ZooKeeper (docs/architecture.md, "State, recovery and
// HA").
//
//   - Elector holds the Lease through client-go's leaderelection: Elected
//     is closed when this replica becomes the leader, Lost when it stops
//     being it. A replica never becomes leader twice: one that loses the
//     Lease stops and exits, and its restart is a standby again.
//   - Fence answers, before every write, whether this replica may still
//     write: it must lead and have renewed the Lease within its renew
//     deadline, which is shorter than the lease duration another replica
//     waits out before it takes over. FenceTransport applies it to every
//     mutating request of a Kubernetes client.
//   - Standby is what a standby answers: StandbyException ("ResourceManager
//     rm2 is not Active!", AdminService's words) to every RPC but
//     HAServiceProtocol, on every port, before SASL for token ports; its web
//     port answers /ws/v1/cluster/info with haState STANDBY and redirects
//     everything else to the active RM, as RMWebAppFilter does.
//   - Service is HAServiceProtocol: getServiceStatus from the Lease,
//     monitorHealth, and manual transitions refused as YARN refuses them
//     when automatic failover is on.
//
// Imports: client-go, the protocols, and the standard library.
package ha
