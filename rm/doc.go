// Package rm is Knit's ResourceManager: applications, attempts and containers
// with their state machines; the client, application-master and admin
// services; queues, tokens, ACLs, persistence in the Kubernetes API, and the
// REST API. It speaks to the wire through protocols/ipc and turns asks into
// pods through rgs and rks.
//
// The ResourceManager type serves ApplicationClientProtocol over the state
// machines of rm/apps, the queues of rm/queues and the tokens of rm/tokens;
// it reaches storage, nodes and AM launches through small interfaces of its
// own (AppStore, IDSource, NodeLister, ContainerLauncher). AdminService serves
// ResourceManagerAdministrationProtocol over it: refreshQueues,
// refreshAdminAcls and refreshClusterMaxPriority swap the RM's queue tree
// and settings atomically while it runs (refresh.go).
package rm
