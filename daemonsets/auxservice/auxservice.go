// Package auxservice is knit-node's host of the NodeManager's auxiliary
// services (YARN's AuxServices): each service has a name, starts and stops
// with the node, is told when an application's first container starts on
// the node and when the application ends there, and publishes metadata that
// startContainers hands back to the AM (the MapReduce shuffle's port, for
// one).
package auxservice

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnid"
)

// Application is what a service learns of an application whose first
// container starts on the node: AuxiliaryService.initializeApplication's
// ApplicationInitializationContext.
type Application struct {
	// User is the application's submitter.
	User string
	// ID is the application.
	ID yarnid.ApplicationID
	// ServiceData is the launch context's service_data entry for this
	// service, as the AM sent it; nil when the container carried none.
	ServiceData []byte
}

// Service is one auxiliary service.
type Service interface {
	// Name is the service's name in yarn.nodemanager.aux-services and in
	// service_data, e.g. "mapreduce_shuffle".
	Name() string
	// Metadata is what startContainers answers for the service, e.g. the
	// shuffle's port as a 4-byte big-endian int. Known once the service
	// listens.
	Metadata() []byte
	// Serve runs the service until ctx ends; it returns nil then.
	Serve(ctx context.Context) error
	// InitializeApplication tells the service an application's container
	// starts on the node. It is called for every container that carries
	// service data for the service, so it must be idempotent.
	InitializeApplication(ctx context.Context, app Application) error
	// StopApplication tells the service the application ended on the node.
	StopApplication(ctx context.Context, id yarnid.ApplicationID) error
}
