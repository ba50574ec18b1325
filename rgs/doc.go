// Package rgs turns YARN container asks (ResourceRequest, SchedulingRequest)
// into pending Pods and scheduled Pods back into YARN Containers. It knows
// the Kubernetes and YARN resource models and nothing of RPC; what it needs
// from the ResourceManager it declares as small interfaces of its own.
//
// RGS is a level-based controller, in the ReplicaSet controller's shape:
// the informer's handlers only queue keys, and workers sync each key from
// the cache and the RM's intents. controller.go holds the controller, its
// informer and workers; retry.go its one retry policy (the queues' rate
// limiters, each write tried once per sync; a request path's write, which
// has no key to requeue, tried again in place by the same rule) and field
// manager;
// expectations.go the pods written and not yet seen. book.go keeps an
// attempt's asks and asks.go makes pending pods of them, in slow-start
// batches; podspec.go builds the pod of one ask; containers.go makes
// containers of bound pods and reports their ends; update.go resizes them
// in place and moves their versions on; removal.go carries out the RM's
// removals, and gc.go those the intents missed, against what the RM
// holds (Desired); admit.go lifts gates as the queues admit, and
// admitted.go adds up the pods it let go that are not yet containers, for
// the RM's headroom; start.go rebuilds the books and containers from the
// pods at Start.
package rgs
