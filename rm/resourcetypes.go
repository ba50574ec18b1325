package rm

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// ResourceType is one resource the cluster schedules, as YARN's
// ResourceInformation describes it.
type ResourceType struct {
	Name  string
	Units string
}

// DefaultResourceTypes returns the two types every YARN cluster has. Java
// clients crash on an empty list (ResourcePBImpl.initResources), so these are
// never left out.
func DefaultResourceTypes() []ResourceType {
	return []ResourceType{
		{Name: "memory-mb", Units: "Mi"},
		{Name: "vcores", Units: ""},
	}
}

// ResourceTypeInfo answers getResourceTypeInfo, the first call a
// DistributedShell client makes.
type ResourceTypeInfo struct {
	// Types lists the cluster's resource types; nil means DefaultResourceTypes.
	Types []ResourceType
}

// GetResourceTypeInfo lists the cluster's resource types, all countable.
func (r ResourceTypeInfo) GetResourceTypeInfo(context.Context, *yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
	return &yarnpb.GetAllResourceTypeInfoResponseProto{ResourceTypeInfo: r.infos()}, nil
}

// infos lists the types as getResourceTypeInfo and registerApplicationMaster
// carry them.
func (r ResourceTypeInfo) infos() []*yarnpb.ResourceTypeInfoProto {
	types := r.Types
	if types == nil {
		types = DefaultResourceTypes()
	}
	out := make([]*yarnpb.ResourceTypeInfoProto, 0, len(types))
	for _, t := range types {
		out = append(out, &yarnpb.ResourceTypeInfoProto{
			Name:  proto.String(t.Name),
			Units: proto.String(t.Units),
			Type:  yarnpb.ResourceTypesProto_COUNTABLE.Enum(),
		})
	}
	return out
}
