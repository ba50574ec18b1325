package ipc

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
)

// requestHeaderSeeds are RequestHeaderProtos as clients send them, and
// as they should not.
func requestHeaderSeeds(t testing.TB) [][]byte {
	whole, err := proto.Marshal(&commonpb.RequestHeaderProto{
		MethodName:                 proto.String("getApplicationReport"),
		DeclaringClassProtocolName: proto.String("org.apache.hadoop.yarn.api.ApplicationClientProtocolPB"),
		ClientProtocolVersion:      proto.Uint64(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	noVersion, err := proto.MarshalOptions{AllowPartial: true}.Marshal(&commonpb.RequestHeaderProto{
		MethodName: proto.String("m"), DeclaringClassProtocolName: proto.String("p"),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The method named twice: proto keeps the last.
	twice := protowire.AppendString(protowire.AppendTag(bytes.Clone(whole), 1, protowire.BytesType), "allocate")
	// An unknown field, and a known number with another wire type.
	unknown := protowire.AppendVarint(protowire.AppendTag(bytes.Clone(whole), 9, protowire.VarintType), 7)
	wrongType := protowire.AppendVarint(protowire.AppendTag(bytes.Clone(whole), 2, protowire.VarintType), 7)
	return [][]byte{whole, noVersion, twice, unknown, wrongType, whole[:len(whole)-3], {0x0a, 0xff}, {0x0c}, nil}
}

func TestScanRequestHeaderReadsWhatProtoReads(t *testing.T) {
	for _, b := range requestHeaderSeeds(t) {
		checkScanAgainstProto(t, b)
	}
}

// FuzzScanRequestHeader checks the engine's quick reading of a call's
// RequestHeaderProto against proto's on any bytes: what it takes, proto
// takes with the same fields; what proto takes, it takes.
func FuzzScanRequestHeader(f *testing.F) {
	for _, b := range requestHeaderSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkScanAgainstProto)
}

func checkScanAgainstProto(t *testing.T, b []byte) {
	h, ok := scanRequestHeader(b)
	var rh commonpb.RequestHeaderProto
	err := proto.Unmarshal(b, &rh)
	switch {
	case ok && err != nil:
		t.Fatalf("%x: scanned %+v, proto refuses: %v", b, h, err)
	case !ok && err == nil:
		t.Fatalf("%x: proto reads %v, the scan does not", b, &rh)
	case ok && (string(h.method) != rh.GetMethodName() || string(h.protocol) != rh.GetDeclaringClassProtocolName() || h.version != rh.GetClientProtocolVersion()):
		t.Fatalf("%x: scanned %q %q %d, proto reads %v", b, h.method, h.protocol, h.version, &rh)
	}
}
