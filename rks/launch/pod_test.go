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
