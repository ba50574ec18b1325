package rm

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

func TestResourceTypeInfoAnswersWhatARealRMAnswers(t *testing.T) {
	// The real Apache YARN 3.4.1 RM's answer to a DistributedShell client
	// (testdata/hadoop-wire-real/ds-client, callId 0).
	var want yarnpb.GetAllResourceTypeInfoResponseProto
	if err := prototext.Unmarshal([]byte(`
		resource_type_info { name: "memory-mb" units: "Mi" type: COUNTABLE }
		resource_type_info { name: "vcores" units: "" type: COUNTABLE }`), &want); err != nil {
		t.Fatal(err)
	}
	got, err := ResourceTypeInfo{}.GetResourceTypeInfo(context.Background(), &yarnpb.GetAllResourceTypeInfoRequestProto{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, &want) {
		t.Errorf("answer = %v\nwant %v", got, &want)
	}
}

func TestResourceTypeInfoBytesEqualTheRealRMsAnswer(t *testing.T) {
	s2c, err := os.ReadFile(recordings.Path(t, "hadoop-wire-real", "ds-client", "1-8032-s2c.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// The first answer on the connection is callId 0, getResourceTypeInfo:
	// a 4-byte length, the delimited response header, the delimited answer.
	frame := s2c[4 : 4+binary.BigEndian.Uint32(s2c)]
	hdrLen, n := protowire.ConsumeVarint(frame)
	frame = frame[n+int(hdrLen):]
	bodyLen, n := protowire.ConsumeVarint(frame)
	recorded := frame[n : n+int(bodyLen)]

	got, err := ResourceTypeInfo{}.GetResourceTypeInfo(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, recorded) {
		t.Errorf("ours % x\nreal % x", ours, recorded)
	}
}

func TestResourceTypeInfoListsConfiguredTypes(t *testing.T) {
	types := append(DefaultResourceTypes(), ResourceType{Name: "yarn.io/gpu"})
	got, err := ResourceTypeInfo{Types: types}.GetResourceTypeInfo(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetResourceTypeInfo()); n != 3 || got.GetResourceTypeInfo()[2].GetName() != "yarn.io/gpu" {
		t.Errorf("answer = %v", got)
	}
}
