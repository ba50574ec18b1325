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
