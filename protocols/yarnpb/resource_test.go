package yarnpb

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestMemoryAndVcoresPreferFieldsOverTheResourceMap(t *testing.T) {
	mapOf := func(mb, vc int64) []*ResourceInformationProto {
		return []*ResourceInformationProto{{Key: proto.String("memory-mb"), Value: proto.Int64(mb)}, {Key: proto.String("vcores"), Value: proto.Int64(vc)}}
	}
	tests := []struct {
		name   string
		r      *ResourceProto
		mb     int64
		vcores int32
	}{
		{"nil is zero", nil, 0, 0},
		{"fields only", &ResourceProto{Memory: proto.Int64(512), VirtualCores: proto.Int32(2)}, 512, 2},
		{"fields win over the map", &ResourceProto{Memory: proto.Int64(512), VirtualCores: proto.Int32(2), ResourceValueMap: mapOf(9, 9)}, 512, 2},
		{"the map fills unset fields", &ResourceProto{ResourceValueMap: mapOf(2048, 3)}, 2048, 3},
		{"what NewResource writes reads back", NewResource(1024, 1), 1024, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if mb, vc := MemoryAndVcores(tt.r); mb != tt.mb || vc != tt.vcores {
				t.Errorf("got %d MB %d vcores, want %d and %d", mb, vc, tt.mb, tt.vcores)
			}
		})
	}
}

func TestNewResourceIsTheJavaRMsResourceInOneAllocation(t *testing.T) {
	want := &ResourceProto{
		Memory:       proto.Int64(2048),
		VirtualCores: proto.Int32(3),
		ResourceValueMap: []*ResourceInformationProto{
			{Key: proto.String("memory-mb"), Value: proto.Int64(2048), Units: proto.String("Mi"), Type: ResourceTypesProto_COUNTABLE.Enum()},
			{Key: proto.String("vcores"), Value: proto.Int64(3), Units: proto.String(""), Type: ResourceTypesProto_COUNTABLE.Enum()},
		},
	}
	got := NewResource(2048, 3)
	if !proto.Equal(got, want) {
		t.Fatalf("NewResource(2048, 3) = %v, want %v", got, want)
	}
	// Each field has a value of its own, as when each was allocated apart.
	*got.Memory = 1
	*got.ResourceValueMap[1].Units = "G"
	if got.ResourceValueMap[0].GetValue() != 2048 || got.ResourceValueMap[0].GetUnits() != "Mi" {
		t.Errorf("changing one field changed another: %v", got)
	}
	if got.ResourceValueMap[0].Type == got.ResourceValueMap[1].Type {
		t.Error("the entries share their type")
	}
	if n := testing.AllocsPerRun(100, func() { _ = NewResource(2048, 3) }); n != 1 {
		t.Errorf("NewResource makes %v allocations, want 1", n)
	}
}
