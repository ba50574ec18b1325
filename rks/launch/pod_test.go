package launch

import (
	"bytes"
	"strings"
	"testing"
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
