// Package rgs turns YARN container asks (ResourceRequest, SchedulingRequest)
// into pending Pods and scheduled Pods back into YARN Containers. It knows
// the Kubernetes and YARN resource models and nothing of RPC; what it needs
// from the ResourceManager it declares as small interfaces of its own.
//
// Not built yet: see the issue "RGS and the ApplicationMasterProtocol".
package rgs
