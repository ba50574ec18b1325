// Package rgs turns YARN container asks (ResourceRequest, SchedulingRequest)
// into pending Pods and scheduled Pods back into YARN Containers. It knows
// the Kubernetes and YARN resource models and nothing of RPC; what it needs
// from the ResourceManager it declares as small interfaces of its own.
//
// book.go keeps an attempt's asks, podspec.go builds the pod of one ask,
// controller.go reconciles pods to asks and makes containers of bound pods,
// update.go resizes them in place and moves their versions on.
package rgs
