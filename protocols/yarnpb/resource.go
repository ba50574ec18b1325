package yarnpb

import "google.golang.org/protobuf/proto"

// NewResource writes a Resource as the Java RM does: fields 1 and 2 and the
// resource_value_map entries of memory-mb (units Mi) and vcores, both
// COUNTABLE (hadoop-wire-facts §9 item 34).
func NewResource(memoryMB int64, vcores int32) *ResourceProto {
	return &ResourceProto{
		Memory:       proto.Int64(memoryMB),
		VirtualCores: proto.Int32(vcores),
		ResourceValueMap: []*ResourceInformationProto{
			{Key: proto.String("memory-mb"), Value: proto.Int64(memoryMB), Units: proto.String("Mi"), Type: ResourceTypesProto_COUNTABLE.Enum()},
			{Key: proto.String("vcores"), Value: proto.Int64(int64(vcores)), Units: proto.String(""), Type: ResourceTypesProto_COUNTABLE.Enum()},
		},
	}
}

// MemoryAndVcores reads a Resource's memory (MB) and vcores as Java does:
// fields 1 and 2 first, the resource_value_map entries when they are unset.
func MemoryAndVcores(r *ResourceProto) (memoryMB int64, vcores int32) {
	memoryMB, vcores = r.GetMemory(), r.GetVirtualCores()
	for _, e := range r.GetResourceValueMap() {
		switch e.GetKey() {
		case "memory-mb":
			if r.Memory == nil {
				memoryMB = e.GetValue()
			}
		case "vcores":
			if r.VirtualCores == nil {
				vcores = int32(e.GetValue())
			}
		}
	}
	return memoryMB, vcores
}
