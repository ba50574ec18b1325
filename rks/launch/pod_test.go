package launch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestAuxServicesRoundTripAndRefuseWhatIsNotTheirs(t *testing.T) {
	services := map[string][]byte{ShuffleService: PortMetadata(13562), SparkShuffleService: {}}
	v, err := EncodeAuxServices(services)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAuxServices(v)
	if err != nil || len(got) != 2 || !bytes.Equal(got[ShuffleService], []byte{0, 0, 0x34, 0xfa}) {
		t.Fatalf("decoded %v, %v", got, err)
	}
	for _, bad := range []string{"", "[1]", `{"a":"not base64!"}`, strings.Repeat(" ", MaxAuxServicesBytes+1)} {
		if _, err := DecodeAuxServices(bad); err == nil {
			t.Errorf("DecodeAuxServices(%.20q) accepted", bad)
		}
	}
	if _, err := EncodeAuxServices(map[string][]byte{"big": make([]byte, MaxAuxServicesBytes)}); err == nil {
		t.Error("an annotation over the limit was encoded")
	}
}

func FuzzDecodeAuxServices(f *testing.F) {
	for _, seed := range []string{`{"mapreduce_shuffle":"AAA0+g=="}`, `{}`, `null`, ``, "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeAuxServices(s)
		if err != nil {
			return
		}
		if len(s) > MaxAuxServicesBytes {
			t.Fatalf("accepted %d bytes, over the limit", len(s))
		}
		if _, err := EncodeAuxServices(got); err != nil {
			t.Fatalf("decoded services do not encode again: %v", err)
		}
	})
}

func TestLogAggregationContextKeepsOnlyWhatTheApplicationSet(t *testing.T) {
	set := "stdout|syslog"
	c, ok := LogAggregationContextOf(&yarnpb.LogAggregationContextProto{IncludePattern: &set})
	if !ok || c != (LogAggregationContext{IncludePattern: set}) {
		t.Fatalf("read %+v, %v", c, ok)
	}
	// The proto's declared defaults (".*" rolled exclude) are not values
	// the application set: the token carries only what it did.
	p := c.Proto()
	if p.RolledLogsExcludePattern != nil || p.GetIncludePattern() != set {
		t.Errorf("proto %v", p)
	}
	if _, ok := LogAggregationContextOf(nil); ok {
		t.Error("no context read as one")
	}
	v, err := EncodeLogAggregationContext(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeLogAggregationContext(v)
	if err != nil || back != c {
		t.Fatalf("round trip %+v, %v", back, err)
	}
	for _, bad := range []string{"", "[1]", `{"includePattern":1}`, `"` + strings.Repeat("a", MaxLogAggregationContextBytes) + `"`} {
		if _, err := DecodeLogAggregationContext(bad); err == nil {
			t.Errorf("DecodeLogAggregationContext(%.20q) accepted", bad)
		}
	}
}

func FuzzDecodeLogAggregationContext(f *testing.F) {
	for _, seed := range []string{`{"includePattern":".*","rolledLogsIncludePattern":"std"}`, `{}`, `null`, ``, "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeLogAggregationContext(s)
		if err != nil {
			return
		}
		if len(s) > MaxLogAggregationContextBytes {
			t.Fatalf("accepted %d bytes, over the limit", len(s))
		}
		back, ok := LogAggregationContextOf(c.Proto())
		if !ok || back != c {
			t.Fatalf("%+v does not survive the token: %+v", c, back)
		}
	})
}

func TestUtilizationRoundTripsAndRefusesWhatNoMeasurementGives(t *testing.T) {
	u := NodeUtilization{
		Node:       ResourceUtilization{PmemMB: 3626, VmemMB: 3626, CPU: 0.1332889},
		Containers: ResourceUtilization{PmemMB: 121, VmemMB: 2636, CPU: 0.026},
		Physical:   PhysicalResource{MemoryMB: 24103, Vcores: 2},
	}
	v, err := EncodeUtilization(u)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeUtilization(v)
	if err != nil || back != u {
		t.Fatalf("round trip %+v, %v", back, err)
	}
	p := back.Containers.Proto()
	if p.GetPmem() != 121 || p.GetVmem() != 2636 || p.GetCpu() != 0.026 {
		t.Errorf("proto %v", p)
	}
	for _, bad := range []string{
		"", "[1]", "null x", `{"node":{"pmemMB":"1"}}`, `{"node":{"pmemMB":-1}}`,
		`{"containers":{"cpu":-0.5}}`, `{"node":{"vmemMB":4294967296}}`,
		`{"node":{"pmemMB":1}` + strings.Repeat(" ", MaxUtilizationBytes) + `}`,
		`{"physical":{"memoryMB":-1,"vcores":2}}`, `{"physical":{"memoryMB":24103,"vcores":-2}}`,
		`{"physical":{"vcores":2147483648}}`, `{"physical":[]}`,
	} {
		if _, err := DecodeUtilization(bad); err == nil {
			t.Errorf("DecodeUtilization(%.30q) accepted", bad)
		}
	}
	if _, err := EncodeUtilization(NodeUtilization{Node: ResourceUtilization{CPU: -1}}); err == nil {
		t.Error("a negative CPU was encoded")
	}
	if _, err := EncodeUtilization(NodeUtilization{Physical: PhysicalResource{MemoryMB: -1}}); err == nil {
		t.Error("a negative physical memory was encoded")
	}
}

// TestUtilizationWithoutThePhysicalResourceDecodesAsUnknown: an annotation
// from a knit-node that publishes no physical resource still decodes, its
// figures whole and its machine zero (unknown), and a zero machine is left
// out of what is encoded.
func TestUtilizationWithoutThePhysicalResourceDecodesAsUnknown(t *testing.T) {
	figures := NodeUtilization{
		Node:       ResourceUtilization{PmemMB: 3626, VmemMB: 3626, CPU: 0.13},
		Containers: ResourceUtilization{PmemMB: 121, VmemMB: 2636, CPU: 0.026},
	}
	withPhysical := func(p PhysicalResource) NodeUtilization { u := figures; u.Physical = p; return u }
	tests := []struct {
		name       string
		annotation string
		want       NodeUtilization
	}{
		{"an older knit-node's annotation", `{"node":{"pmemMB":3626,"vmemMB":3626,"cpu":0.13},"containers":{"pmemMB":121,"vmemMB":2636,"cpu":0.026}}`, figures},
		{"an annotation with the machine",
			`{"node":{"pmemMB":3626,"vmemMB":3626,"cpu":0.13},"containers":{"pmemMB":121,"vmemMB":2636,"cpu":0.026},"physical":{"memoryMB":24103,"vcores":2}}`,
			withPhysical(PhysicalResource{MemoryMB: 24103, Vcores: 2})},
		{"a machine with its memory only",
			`{"node":{"pmemMB":3626,"vmemMB":3626,"cpu":0.13},"containers":{"pmemMB":121,"vmemMB":2636,"cpu":0.026},"physical":{"memoryMB":24103}}`,
			withPhysical(PhysicalResource{MemoryMB: 24103})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeUtilization(tt.annotation)
			if err != nil || got != tt.want {
				t.Fatalf("decoded %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	v, err := EncodeUtilization(figures)
	if err != nil || strings.Contains(v, "physical") {
		t.Errorf("an unknown machine encodes as %s, %v; want no physical key", v, err)
	}
}

func FuzzDecodeUtilization(f *testing.F) {
	for _, seed := range []string{
		`{"node":{"pmemMB":3626,"vmemMB":3626,"cpu":0.13},"containers":{"pmemMB":121,"vmemMB":2636,"cpu":0.026}}`,
		`{"node":{"pmemMB":3626,"vmemMB":3626,"cpu":0.13},"containers":{"pmemMB":121,"vmemMB":2636,"cpu":0.026},"physical":{"memoryMB":24103,"vcores":2}}`,
		`{"physical":{"memoryMB":-1}}`, `{}`, `null`, ``, "\xff", `{"node":{"cpu":1e39}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := DecodeUtilization(s)
		if err != nil {
			return
		}
		if len(s) > MaxUtilizationBytes {
			t.Fatalf("accepted %d bytes, over the limit", len(s))
		}
		v, err := EncodeUtilization(u)
		if err != nil {
			t.Fatalf("decoded %+v does not encode again: %v", u, err)
		}
		if back, err := DecodeUtilization(v); err != nil || back != u {
			t.Fatalf("%+v does not survive a round trip: %+v, %v", u, back, err)
		}
	})
}
