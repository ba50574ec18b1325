package shuffle

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestQueryDecodesAsNettysQueryStringDecoder(t *testing.T) {
	tests := []struct {
		uri  string
		want map[string][]string
	}{
		{"/mapOutput?job=j&reduce=0&map=a,b", map[string][]string{"job": {"j"}, "reduce": {"0"}, "map": {"a,b"}}},
		{"/mapOutput", map[string][]string{}},
		{"/p?a=1;b=2&a=3", map[string][]string{"a": {"1", "3"}, "b": {"2"}}},
		{"/p?flag&=skipped&x=", map[string][]string{"flag": {""}, "skipped": {""}, "x": {""}}},
		{"/p?a=1#b=2", map[string][]string{"a": {"1"}}},
		{"/p#a=1", map[string][]string{}},
		{"/p?a=x%2Cy+z&b=%E2%82%AC", map[string][]string{"a": {"x,y z"}, "b": {"€"}}},
		{"/p?a=b=c", map[string][]string{"a": {"b=c"}}},
		{"/p?a=%ff", map[string][]string{"a": {"\uFFFD"}}},
	}
	for _, tt := range tests {
		got, err := parseQuery(tt.uri)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseQuery(%q) = %v, %v; want %v", tt.uri, got, err, tt.want)
		}
	}
	for _, bad := range []string{"/p?a=%", "/p?a=%2", "/p?a=%zz"} {
		if _, err := parseQuery(bad); !errors.Is(err, errBadEscape) {
			t.Errorf("parseQuery(%q): %v, want errBadEscape", bad, err)
		}
	}
	many, _ := parseQuery("/p?" + strings.Repeat("a=1&", 2000))
	if len(many["a"]) != maxQueryParams {
		t.Errorf("%d parameters kept, want %d", len(many["a"]), maxQueryParams)
	}
}

func TestMapListsSplitAsJavasStringSplit(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{""}, []string{""}},
		{[]string{","}, []string{}},
		{[]string{"a,b,"}, []string{"a", "b"}},
		{[]string{",a"}, []string{"", "a"}},
		{[]string{"a,,b", "c"}, []string{"a", "", "b", "c"}},
	}
	for _, tt := range tests {
		if got := splitMaps(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitMaps(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHashMessageIsPortPathAndQuery(t *testing.T) {
	tests := []struct{ uri, want string }{
		{"/mapOutput?job=j&reduce=0&map=m", "13562/mapOutput?job=j&reduce=0&map=m"},
		{"/mapOutput?a#frag", "13562/mapOutput?a"},
		{"/mapOutput", "13562/mapOutput?null"},
	}
	for _, tt := range tests {
		if got := hashMessage(13562, tt.uri); got != tt.want {
			t.Errorf("hashMessage(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
}

func TestHashesMatchTheRecordedExchange(t *testing.T) {
	// fetcher/01 of the recordings, with job _0003's secret from its README.
	secret := []byte{0x75, 0x8c, 0xaf, 0x0f, 0xf9, 0x2a, 0xba, 0x64}
	msg := "13562/mapOutput?job=job_1795680442682_0003&reduce=0&map=attempt_1795680442682_0003_m_000002_0"
	if got := shuffleHash(secret, []byte(msg)); got != "1UT6vzlxNr6NOVFrJDZ6CCCUSw0=" {
		t.Errorf("UrlHash %q", got)
	}
	if got := shuffleHash(secret, []byte("1UT6vzlxNr6NOVFrJDZ6CCCUSw0=")); got != "ht/nslca+oXx80tQzJ8JTjApH/g=" {
		t.Errorf("ReplyHash %q", got)
	}
	for _, sent := range []string{"1UT6vzlxNr6NOVFrJDZ6CCCUSw0=", "1UT6vzlxNr6NOVFrJDZ6CCCUSw0", " 1UT6vzlx\nNr6NOVFrJDZ6CCCUSw0="} {
		if !verifyShuffleHash(secret, []byte(msg), sent) {
			t.Errorf("%q was refused; commons-codec accepts it", sent)
		}
	}
	if verifyShuffleHash(secret, []byte(msg), "AAAAAAAAAAAAAAAAAAAAAAAAAAA=") {
		t.Error("a wrong hash was accepted")
	}
}

func TestRequestHeadsParseWithinBounds(t *testing.T) {
	req, err := readRequest(bufio.NewReader(strings.NewReader(
		"\r\nGET /mapOutput?x HTTP/1.1\r\nUrlHash:  abc \r\nX-Long: a\r\n  b\r\nContent-Length: 3\r\n\r\n")), 4096, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := req.header("urlhash"); h != "abc" || req.uri != "/mapOutput?x" || req.contentLength != 3 {
		t.Errorf("UrlHash %q, uri %q, content-length %d", h, req.uri, req.contentLength)
	}
	if h, _ := req.header("X-Long"); h != "a b" {
		t.Errorf("folded header %q", h)
	}
	for name, in := range map[string]string{
		"two content lengths": "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"signed length":       "GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
		"space before colon":  "GET / HTTP/1.1\r\nName : x\r\n\r\n",
		"HTTP/2":              "GET / HTTP/2.0\r\n\r\n",
		"no colon":            "GET / HTTP/1.1\r\nhello\r\n\r\n",
	} {
		if _, err := readRequest(bufio.NewReader(strings.NewReader(in)), 4096, 8192); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want errMalformed", name, err)
		}
	}
}

// Fuzz targets: every parser of network bytes, each input bounded.

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("GET /mapOutput?job=j&reduce=0&map=m HTTP/1.1\r\nUrlHash: x\r\nname: mapreduce\r\nversion: 1.0.0\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.0\r\nContent-Length: 5\r\n folded\r\n\r\nhello"))
	f.Add([]byte("\r\n\r\nGET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 64<<10 {
			return
		}
		const maxLine, maxHeader = 256, 1024
		req, err := readRequest(bufio.NewReaderSize(bytes.NewReader(b), 512), maxLine, maxHeader)
		if err != nil {
			return
		}
		if len(req.method)+len(req.uri)+len(req.proto) > maxLine {
			t.Fatalf("request line beyond %d bytes accepted", maxLine)
		}
		n := 0
		for _, h := range req.headers {
			n += len(h.name) + len(h.value)
		}
		if n > maxHeader || len(req.headers) > maxHeaderLines || req.contentLength < 0 {
			t.Fatalf("head beyond bounds accepted: %d bytes, %d lines, length %d", n, len(req.headers), req.contentLength)
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	f.Add("/mapOutput?job=job_1_0001&reduce=0&map=a,b&keepAlive=true")
	f.Add("/p?a=%zz;b=+&=c#d")
	f.Fuzz(func(t *testing.T, uri string) {
		if len(uri) > 16<<10 {
			return
		}
		q, err := parseQuery(uri)
		if err != nil {
			return
		}
		n := 0
		for _, v := range q {
			n += len(v)
		}
		if n > maxQueryParams {
			t.Fatalf("%d parameters kept", n)
		}
		_ = splitMaps(q["map"])
		_, _ = parseJavaInt(strings.Join(q["reduce"], ""))
		_ = hashMessage(13562, uri)
	})
}

func FuzzParseIndex(f *testing.F) {
	_, ix := makeMapOutput([]byte("abc"), []byte("de"))
	f.Add(ix)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		recs, err := parseIndex(b)
		if err != nil {
			return
		}
		if len(recs)*indexRecordBytes+8 > len(b) {
			t.Fatalf("%d records from %d bytes", len(recs), len(b))
		}
		for _, r := range recs {
			if r.start < 0 || r.part < 0 {
				t.Fatalf("negative record %+v accepted", r)
			}
		}
	})
}

func FuzzParseServiceData(f *testing.F) {
	f.Add(serviceData("job_1795680442682_0003", []byte{0x75, 0x8c, 0xaf, 0x0f, 0xf9, 0x2a, 0xba, 0x64}))
	f.Add([]byte{0x8f, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 256<<10 {
			return
		}
		secret, err := parseServiceData(b)
		if err == nil && (len(secret) == 0 || len(secret) > len(b)) {
			t.Fatalf("secret of %d bytes from %d bytes", len(secret), len(b))
		}
	})
}

func FuzzDecodeBase64Lenient(f *testing.F) {
	f.Add("1UT6vzlxNr6NOVFrJDZ6CCCUSw0=")
	f.Add("-_ \n==x")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		got := decodeBase64Lenient(s)
		if std, err := base64.StdEncoding.DecodeString(s); err == nil && !bytes.Equal(got, std) {
			t.Fatalf("%q: lenient %x, standard %x", s, got, std)
		}
		if len(got) > len(s) {
			t.Fatalf("%d bytes from %d characters", len(got), len(s))
		}
	})
}
