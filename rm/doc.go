// Package rm is Knit's ResourceManager: applications, attempts and containers
// with their state machines; the client, application-master and admin
// services; queues, tokens, ACLs, persistence in the Kubernetes API, and the
// REST API. It speaks to the wire through protocols/ipc and turns asks into
// pods through rgs and rks.
//
// So far it holds the resource model a YARN client reads before anything
// else (getResourceTypeInfo); the services grow here issue by issue.
package rm
