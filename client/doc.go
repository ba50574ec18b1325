// Package client is Knit's Go client of the YARN protocols, for Go programs
// that run as YARN clients and application masters — against Knit or any
// YARN ResourceManager. It follows what Hadoop's own Java clients do, since
// the servers are written to them:
//
//   - RMClient is the part of YarnClient (ApplicationClientProtocol) an
//     application submitter needs: it waits after submitApplication until
//     the application leaves NEW/NEW_SAVING/SUBMITTED and repeats
//     forceKillApplication until the kill is complete, as YarnClientImpl
//     does.
//   - AMRMClient is AMRMClientImpl (ApplicationMasterProtocol): it keeps
//     the allocate response id, remembers the asks, releases and blacklist
//     so that it can re-register and resend them when the RM answers
//     ApplicationMasterNotRegisteredException, takes the AMRMToken roll-over
//     and the NMTokens from every answer, and unregisters in a loop until
//     the RM says it is done.
//   - NMClient is NMClientImpl (ContainerManagementProtocol): one
//     connection per node, authenticated with that node's NMToken from an
//     NMTokenCache.
//
// Records and ids are the wire messages of protocols/yarnpb; yarnid turns
// ids into strings and back. A Java exception thrown by a server comes back
// as a *yarnerr.Error wrapping the *ipc.RemoteError it came as (test it with
// errors.Is(err, yarnerr.ApplicationNotFound) and the like); one a
// NodeManager reports for a single container as a *SerializedError, which
// errors.Is matches against yarnerr classes too.
//
// Behaviour follows docs/hadoop-wire-facts.md §2–§5.
package client
