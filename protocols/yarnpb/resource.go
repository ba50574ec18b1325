package yarnpb

// NewResource writes a Resource as the Java RM does: fields 1 and 2 and the
// resource_value_map entries of memory-mb (units Mi) and vcores, both
// COUNTABLE (hadoop-wire-facts §9 item 34). The message and everything it
// points to are one allocation (resourceBlock): resources are in every
// report and heartbeat answer, where fourteen small objects cost the
// allocator and the collector more than one of their total size.
func NewResource(memoryMB int64, vcores int32) *ResourceProto {
	b := &resourceBlock{
		memory: memoryMB, vcores: vcores,
		values: [2]int64{memoryMB, int64(vcores)},
		keys:   [2]string{"memory-mb", "vcores"},
		units:  [2]string{"Mi", ""},
		types:  [2]ResourceTypesProto{ResourceTypesProto_COUNTABLE, ResourceTypesProto_COUNTABLE},
	}
	for i := range b.info {
		in := &b.info[i]
		in.Key, in.Value, in.Units, in.Type = &b.keys[i], &b.values[i], &b.units[i], &b.types[i]
		b.list[i] = in
	}
	b.r.Memory, b.r.VirtualCores, b.r.ResourceValueMap = &b.memory, &b.vcores, b.list[:]
	return &b.r
}

// resourceBlock holds a NewResource message and the values its fields
// point to. Each field has a value of its own, as when each was allocated
// apart, so a holder that changes one through its pointer changes no other.
type resourceBlock struct {
	r      ResourceProto
	memory int64
	vcores int32
	values [2]int64
	keys   [2]string
	units  [2]string
	types  [2]ResourceTypesProto
	info   [2]ResourceInformationProto
	list   [2]*ResourceInformationProto
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
