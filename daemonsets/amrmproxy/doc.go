// Package amrmproxy is the node's AMRMProxy, as a NodeManager with
// yarn.nodemanager.amrmproxy.enabled hosts it: application masters on the
// node reach it as their scheduler (ApplicationMasterProtocol on
// yarn.nodemanager.amrmproxy.address) with a token the node signs, and it
// talks to the ResourceManager with the attempt's real AMRMToken, which the
// AM never holds.
//
// Each attempt gets a pipeline of interceptors (Interceptor) named by
// yarn.nodemanager.amrmproxy.interceptor-class.pipeline; the last one
// forwards to the home RM (DefaultInterceptor). In front of it may go
// the ThrottleInterceptor (Knit's: slows and bounds an AM's asks) and the
// FederationInterceptor (YARN Federation: splits asks across sub-clusters
// by the queue's AMRMProxy policy, Broadcast, Home or LocalityMulticast, with an unmanaged AM
// in each secondary sub-cluster; a goroutine per sub-cluster heartbeats it
// asynchronously, as YARN 3.4's AMHeartbeatRequestHandler does). The Service owns the
// pipelines: StartApplicationMaster builds one when an AM container is
// prepared and returns the local token for the container's token file;
// a successful finishApplicationMaster, EndAttempt (the AM pod gone) or
// EndApplication ends it.
//
// The local tokens are signed by Secrets (YARN's
// AMRMProxyTokenSecretManager): the same AMRMTokenIdentifier shape the RM
// signs, under master keys of the node's that roll on the RM's AMRMToken
// schedule. When the RM rolls its key, the pipeline keeps the new real
// token; when the node's key rolls, the AM gets a new local token in an
// allocate answer, as the RM would hand it one.
//
// Imports: protocols (ipc, yarnrpc, yarnpb, token, yarnerr), hadoopconf
// for the settings, client for Knit's AMRM and RM clients towards the RMs,
// and federation (its store and policy names) for the federation
// interceptor.
package amrmproxy
