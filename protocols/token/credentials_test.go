package token

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/writable"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

// realContainerTokens are container_tokens files written by real Hadoop
// NodeManagers, with the values the facts doc and the testdata READMEs give.
var realContainerTokens = []struct {
	name          string
	path          string
	identifierHex string
	passwordHex   string
	appID         int32
	clusterTS     int64
	attemptID     int32
	keyID         int32
}{
	{
		name:          "Elly.jl fixture (facts doc §3)",
		path:          "docs/fixtures/container_tokens.elly.bin",
		identifierHex: "0a0d0a09080d109f81d5b2f32d100110fca7e6b103",
		passwordHex:   "b1aabc2cb0a9dfb89a17ea5a01bfe921988051a1",
		appID:         13, clusterTS: 1577164554399, attemptID: 1, keyID: 909743100,
	},
	{
		name:          "hadoop-wire ds-am (scripted RM, keys.json amrm_token)",
		path:          "testdata/hadoop-wire/ds-am/container_tokens",
		identifierHex: "0a0d0a0908011080dbd087b532100110f187e7a704",
		passwordHex:   "012ef8040d980b97f00326aac60cd8abe7540472",
		appID:         1, clusterTS: 1732230000000, attemptID: 1, keyID: 1157219313,
	},
	{
		name:          "hadoop-wire-real ds-am (real RM 3.4.1)",
		path:          "testdata/hadoop-wire-real/ds-am/container_tokens",
		identifierHex: "0a0d0a09080210cffdbe91a034100110928895be02",
		passwordHex:   "28dc66180ae392d239488c4b8604adfa2ddf9198",
		appID:         2, clusterTS: 1795333013199, attemptID: 1, keyID: 667239442,
	},
}

// javaClientCredentials is the CLC tokens a Hadoop 3.4.1 YarnClient sent in
// submitApplication (../shared/testdata/hadoop-wire/yarn-client, callId 4,
// decoded.txt line 224): one token and one secret.
const javaClientCredentials = "HDTS\x00\x01\rcapture-token\x12capture-identifier\x10capture-password\rCAPTURE_TOKEN\x0e127.0.0.1:9999\x01\x0ecapture-secret\x06s3cr3t"

// readShared reads a file of ../shared ("docs/..." or "testdata/...")
// through test/recordings, which skips the test without ../shared and fails
// it under CI.
func readShared(t testing.TB, path string) []byte {
	t.Helper()
	full := ""
	if rest, ok := strings.CutPrefix(path, "docs/"); ok {
		full = recordings.Docs(t, rest)
	} else {
		full = recordings.Path(t, strings.TrimPrefix(path, "testdata/"))
	}
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

func TestRealContainerTokensFilesDecodeToTheDocumentedToken(t *testing.T) {
	for _, tc := range realContainerTokens {
		t.Run(tc.name, func(t *testing.T) {
			file := readShared(t, tc.path)
			if len(file) != 69 {
				t.Fatalf("fixture is %d bytes, documented as 69", len(file))
			}
			c, err := ParseCredentials(file)
			if err != nil {
				t.Fatalf("ParseCredentials: %v", err)
			}
			if c.NumTokens() != 1 || c.NumSecrets() != 0 {
				t.Fatalf("%d tokens, %d secrets; want 1, 0", c.NumTokens(), c.NumSecrets())
			}
			tok, ok := c.Token("")
			if !ok {
				t.Fatal(`no token under alias ""`)
			}
			want := Token{
				Identifier: unhex(t, tc.identifierHex),
				Password:   unhex(t, tc.passwordHex),
				Kind:       "YARN_AM_RM_TOKEN",
				Service:    "",
			}
			if !tok.Equal(want) {
				t.Errorf("token %v\nwant  %v", tok, want)
			}
			if len(tok.Password) != 20 {
				t.Errorf("password is %d bytes, want 20 (HMAC-SHA1)", len(tok.Password))
			}

			var id yarnpb.AMRMTokenIdentifierProto
			if err := proto.Unmarshal(tok.Identifier, &id); err != nil {
				t.Fatalf("identifier is not an AMRMTokenIdentifierProto: %v", err)
			}
			attempt := id.GetAppAttemptId()
			if got := attempt.GetApplicationId().GetId(); got != tc.appID {
				t.Errorf("application id %d, want %d", got, tc.appID)
			}
			if got := attempt.GetApplicationId().GetClusterTimestamp(); got != tc.clusterTS {
				t.Errorf("cluster timestamp %d, want %d", got, tc.clusterTS)
			}
			if got := attempt.GetAttemptId(); got != tc.attemptID {
				t.Errorf("attempt id %d, want %d", got, tc.attemptID)
			}
			if got := id.GetKeyId(); got != tc.keyID {
				t.Errorf("key id %d, want %d", got, tc.keyID)
			}

			again, err := c.Marshal(FormatWritable)
			if err != nil || !bytes.Equal(again, file) {
				t.Errorf("re-encoded %x, %v\nwant         %x", again, err, file)
			}
			var buf bytes.Buffer
			if n, err := c.WriteTo(&buf); err != nil || n != int64(len(file)) || !bytes.Equal(buf.Bytes(), file) {
				t.Errorf("WriteTo wrote %d bytes %x, %v", n, buf.Bytes(), err)
			}
		})
	}
}

func TestJavaClientCredentialsWithASecretDecodeAndReencode(t *testing.T) {
	c, err := ParseCredentials([]byte(javaClientCredentials))
	if err != nil {
		t.Fatalf("ParseCredentials: %v", err)
	}
	want := &Credentials{}
	want.AddToken("capture-token", Token{
		Identifier: []byte("capture-identifier"),
		Password:   []byte("capture-password"),
		Kind:       "CAPTURE_TOKEN",
		Service:    "127.0.0.1:9999",
	})
	want.AddSecret("capture-secret", []byte("s3cr3t"))
	if !c.Equal(want) {
		t.Errorf("decoded %v, want %v", dump(c), dump(want))
	}
	if again, _ := c.Marshal(FormatWritable); string(again) != javaClientCredentials {
		t.Errorf("re-encoded %q", again)
	}
}

// sample is Credentials with every shape the formats carry: an empty alias,
// empty fields, bytes that are not UTF-8, and secrets.
func sample() *Credentials {
	c := &Credentials{}
	c.AddToken("", Token{Identifier: []byte{0x0a, 0x00}, Password: bytes.Repeat([]byte{0xb1}, 20), Kind: "YARN_AM_RM_TOKEN"})
	c.AddToken("hdfs", Token{Identifier: []byte{}, Password: nil, Kind: "HDFS_DELEGATION_TOKEN", Service: "ha-hdfs:ns1"})
	c.AddToken("odd", Token{Identifier: []byte{0xff}, Password: []byte{0}, Kind: "\xff\xfe", Service: "é"})
	c.AddSecret("spark", []byte("secret"))
	c.AddSecret("empty", nil)
	return c
}

func TestProtobufFormatIsAVarintDelimitedCredentialsProto(t *testing.T) {
	c := &Credentials{}
	c.AddToken("a", Token{Identifier: []byte("i"), Password: []byte("p"), Kind: "k", Service: "s"})
	c.AddSecret("b", []byte("x"))
	// Worked out by hand from Security.proto: HDTS, format 1, length 27,
	// tokens{alias "a", token{1 "i", 2 "p", 3 "k", 4 "s"}}, secrets{alias "b", secret "x"}.
	want := append([]byte("HDTS\x01"), unhex(t, "1b 0a11 0a0161 120c 0a0169 120170 1a016b 220173 1206 0a0162 1a0178")...)
	got, err := c.Marshal(FormatProtobuf)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal(PROTOBUF) = %x, %v\nwant                 %x", got, err, want)
	}
	back, err := ParseCredentials(want)
	if err != nil || !back.Equal(c) {
		t.Fatalf("ParseCredentials = %v, %v", dump(back), err)
	}
}

func TestBothFormatsRoundTrip(t *testing.T) {
	c := sample()
	for _, f := range []Format{FormatWritable, FormatProtobuf} {
		t.Run(f.String(), func(t *testing.T) {
			b, err := c.Marshal(f)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if !bytes.HasPrefix(b, []byte{'H', 'D', 'T', 'S', byte(f)}) {
				t.Fatalf("stream starts %x", b[:5])
			}
			back, err := ParseCredentials(b)
			if err != nil {
				t.Fatalf("ParseCredentials: %v", err)
			}
			if !back.Equal(c) {
				t.Errorf("round trip %v\nwant %v", dump(back), dump(c))
			}
		})
	}
}

func TestEmptyCredentialsWriteTheShortestStreams(t *testing.T) {
	tests := []struct {
		name string
		c    *Credentials
		f    Format
		want string
	}{
		{"zero value, WRITABLE", &Credentials{}, FormatWritable, "4844545300 00 00"},
		{"nil, WRITABLE", nil, FormatWritable, "4844545300 00 00"},
		{"zero value, PROTOBUF", &Credentials{}, FormatProtobuf, "4844545301 00"},
		{"nil, PROTOBUF", nil, FormatProtobuf, "4844545301 00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Marshal(tc.f)
			if err != nil || !bytes.Equal(got, unhex(t, tc.want)) {
				t.Errorf("Marshal = %x, %v; want %s", got, err, tc.want)
			}
			back, err := ParseCredentials(got)
			if err != nil || back.NumTokens() != 0 || back.NumSecrets() != 0 {
				t.Errorf("ParseCredentials = %v, %v", dump(back), err)
			}
		})
	}
}

func TestBytesAfterTheCountedContentAreIgnored(t *testing.T) {
	base := map[string][]byte{"javaClient": []byte(javaClientCredentials)}
	for _, f := range []Format{FormatWritable, FormatProtobuf} {
		b, err := sample().Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		base["sample "+f.String()] = b
	}
	tails := map[string][]byte{
		"Spark's zero padding": make([]byte, 4096-69),
		"garbage":              []byte("HDTS\x00\xff\xff\xff"),
	}
	for bname, b := range base {
		want, err := ParseCredentials(b)
		if err != nil {
			t.Fatalf("%s: %v", bname, err)
		}
		for tname, tail := range tails {
			padded := append(slices.Clip(b), tail...)
			got, err := ParseCredentials(padded)
			if err != nil || !got.Equal(want) {
				t.Errorf("%s + %s: %v, %v", bname, tname, dump(got), err)
			}
			r := writable.NewReader(bytes.NewReader(padded), writable.Limits{})
			if _, err := ReadCredentials(r); err != nil || r.Offset() != int64(len(b)) {
				t.Errorf("%s + %s: stream reader stopped at %d, want %d (%v)", bname, tname, r.Offset(), len(b), err)
			}
		}
	}
}

func TestSparkPaddedRealFileDecodes(t *testing.T) {
	file := readShared(t, realContainerTokens[0].path)
	padded := make([]byte, 1024) // DataOutputBuffer's backing array
	copy(padded, file)
	c, err := ParseCredentials(padded)
	if err != nil || c.NumTokens() != 1 {
		t.Fatalf("ParseCredentials(padded) = %v, %v", dump(c), err)
	}
}

func TestBrokenStreamsGiveErrors(t *testing.T) {
	protoBody := func(body []byte) string {
		return "HDTS\x01" + string(protowire.AppendVarint(nil, uint64(len(body)))) + string(body)
	}
	missingKind, err := proto.MarshalOptions{AllowPartial: true}.Marshal(&commonpb.CredentialsProto{
		Tokens: []*commonpb.CredentialsKVProto{{
			Alias: proto.String("a"),
			Token: &commonpb.TokenProto{Identifier: []byte{}, Password: []byte{}, Service: proto.String("")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		wantErr error
		wantMsg string
	}{
		{"empty input", "", io.ErrUnexpectedEOF, "token: read credentials header:"},
		{"short magic", "HDT", io.ErrUnexpectedEOF, "token: read credentials header:"},
		{"bad magic", "HDTX\x00\x00\x00", ErrBadMagic, `token: read credentials header "HDTX": bad header`},
		{"no format byte", "HDTS", io.EOF, "token: read credentials format:"},
		{"unknown format", "HDTS\x02\x00\x00", ErrUnknownFormat, "token: read credentials format 2: unknown version"},
		{"no token count", "HDTS\x00", io.EOF, "token: read credentials token count:"},
		{"negative token count", "HDTS\x00\xff", ErrNegativeCount, "token: read credentials token count -1: negative count"},
		{"most negative token count", "HDTS\x00\x84\x7f\xff\xff\xff", ErrNegativeCount, "token count -2147483648"},
		{"token count beyond 32 bits", "HDTS\x00\x8b\x01\x00\x00\x00\x00", writable.ErrVIntRange, "token: read credentials token count:"},
		{"huge token count", "HDTS\x00\x8c\x7f\xff\xff\xff", writable.ErrTooLarge, "token: read credentials token count 2147483647 above 65536: exceeds limit"},
		{"token count just above the limit", "HDTS\x00\x8d\x01\x00\x01", writable.ErrTooLarge, "token count 65537 above 65536"},
		{"count at the limit, no tokens", "HDTS\x00\x8d\x01\x00\x00", io.EOF, "token: read credentials token 0 alias:"},
		{"huge secret count", "HDTS\x00\x00\x8c\x7f\xff\xff\xff", writable.ErrTooLarge, "token: read credentials secret count 2147483647 above 65536"},
		{"second token missing", "HDTS\x00\x02\x00\x00\x00\x00\x00", io.EOF, "token: read credentials token 1 alias:"},
		{"token cut short", "HDTS\x00\x01\x01a\x05ab", io.ErrUnexpectedEOF, `token: read credentials token 0 (alias "a"): token: read identifier:`},
		{"huge identifier length", "HDTS\x00\x01\x00\x8c\x7f\xff\xff\xff", writable.ErrTooLarge, "token: read identifier:"},
		{"no secret count", "HDTS\x00\x00", io.EOF, "token: read credentials secret count:"},
		{"negative secret count", "HDTS\x00\x00\x9f", ErrNegativeCount, "token: read credentials secret count -97:"},
		{"negative secret length", "HDTS\x00\x00\x01\x01s\xff", writable.ErrNegativeLength, `token: read credentials secret 0 (alias "s"):`},
		{"huge secret length", "HDTS\x00\x00\x01\x01s\x8c\x7f\xff\xff\xff", writable.ErrTooLarge, `token: read credentials secret 0 (alias "s"):`},
		{"secret cut short", "HDTS\x00\x00\x01\x01s\x04ab", io.ErrUnexpectedEOF, `token: read credentials secret 0 (alias "s"):`},
		{"no protobuf length", "HDTS\x01", io.EOF, "token: read credentials protobuf length:"},
		{"protobuf length cut", "HDTS\x01\x80", io.ErrUnexpectedEOF, "token: read credentials protobuf length: unexpected EOF"},
		{"protobuf length overflows", "HDTS\x01" + strings.Repeat("\xff", 10) + "\x01", nil, "token: read credentials protobuf length: varint overflows 64 bits"},
		{"protobuf body with too many tokens", protoBody(bytes.Repeat([]byte{0x0a, 0x02, 0x0a, 0x00}, MaxEntries+1)), writable.ErrTooLarge, "token: read credentials protobuf body: 65537 tokens above 65536"},
		{"protobuf body with too many secrets", protoBody(bytes.Repeat([]byte{0x12, 0x02, 0x0a, 0x00}, MaxEntries+1)), writable.ErrTooLarge, "token: read credentials protobuf body: 65537 secrets above 65536"},
		{"protobuf length beyond 32 bits", "HDTS\x01\x80\x80\x80\x80\x10", writable.ErrTooLarge, "token: read credentials protobuf length 4294967296:"},
		{"protobuf length above the total limit", "HDTS\x01\x80\x80\x80\x80\x07", writable.ErrTooLarge, "token: read credentials protobuf body:"},
		{"protobuf body cut short", "HDTS\x01\x05\x0a\x03", io.ErrUnexpectedEOF, "token: read credentials protobuf body:"},
		{"protobuf body not a message", protoBody([]byte{0x0a, 0x05, 0x01}), nil, "token: decode credentials protobuf body:"},
		{"protobuf token without its required kind", protoBody(missingKind), nil, "token: decode credentials protobuf body:"},
		{"protobuf entry without its required alias", protoBody([]byte{0x12, 0x02, 0x1a, 0x00}), nil, "token: decode credentials protobuf body:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, r := range map[string]*writable.Reader{
				"bytes":      writable.NewBytesReader([]byte(tc.in), writable.Limits{}),
				"one-by-one": writable.NewReader(iotest.OneByteReader(strings.NewReader(tc.in)), writable.Limits{}),
			} {
				c, err := ReadCredentials(r)
				if err == nil {
					t.Fatalf("%s: decoded %v, want an error", name, dump(c))
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("%s: err %v, want %v", name, err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("%s: err %q, want it to contain %q", name, err, tc.wantMsg)
				}
			}
		})
	}
}

func TestEveryTruncationOfARealStreamIsAnError(t *testing.T) {
	streams := map[string][]byte{"javaClient": []byte(javaClientCredentials)}
	for _, f := range []Format{FormatWritable, FormatProtobuf} {
		b, err := sample().Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		streams["sample "+f.String()] = b
	}
	for name, b := range streams {
		for n := range len(b) {
			if c, err := ParseCredentials(b[:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes decoded to %v", name, n, len(b), dump(c))
			}
		}
	}
}

func TestHugeDeclaredProtobufLengthAllocatesOnlyWhatArrives(t *testing.T) {
	const arriving = 100 << 10
	head := append([]byte("HDTS\x01"), protowire.AppendVarint(nil, writable.DefaultMaxTotal-16)...)
	src := io.MultiReader(bytes.NewReader(head), io.LimitReader(zeros{}, arriving))
	r := writable.NewReader(src, writable.Limits{})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadCredentials(r)
	runtime.ReadMemStats(&after)

	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want unexpected EOF", err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8*arriving {
		t.Errorf("allocated %d bytes for %d arriving bytes", allocated, arriving)
	}
}

func TestEndlessZeroTokensStopAtTheTotalLimit(t *testing.T) {
	// A huge count followed by endless zeros is an endless run of empty
	// tokens under alias "": only the total limit ends it.
	src := io.MultiReader(strings.NewReader("HDTS\x00\x8c\x7f\xff\xff\xff"), zeros{})
	_, err := ReadCredentials(writable.NewReader(src, writable.Limits{MaxTotal: 1 << 16}))
	if !errors.Is(err, writable.ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestRepeatedAliasesKeepFirstPlaceAndLastValue(t *testing.T) {
	tok := func(kind string) []byte { return Token{Kind: kind}.AppendWritable(nil) }
	var w []byte
	w = append(w, "HDTS\x00\x03"...)
	w = append(append(w, "\x01a"...), tok("A1")...)
	w = append(append(w, "\x01b"...), tok("B")...)
	w = append(append(w, "\x01a"...), tok("A2")...)
	w = append(w, "\x02\x01s\x01\x01\x01s\x01\x02"...)

	wantToks := []string{"a=A2", "b=B"}
	for _, f := range []string{"WRITABLE", "PROTOBUF"} {
		in := w
		if f == "PROTOBUF" {
			// The same entries, repeated alias and all, as a CredentialsProto.
			p := &commonpb.CredentialsProto{}
			for _, kv := range [][2]string{{"a", "A1"}, {"b", "B"}, {"a", "A2"}} {
				p.Tokens = append(p.Tokens, &commonpb.CredentialsKVProto{Alias: proto.String(kv[0]), Token: Token{Kind: kv[1]}.Proto()})
			}
			for _, v := range []byte{1, 2} {
				p.Secrets = append(p.Secrets, &commonpb.CredentialsKVProto{Alias: proto.String("s"), Secret: []byte{v}})
			}
			body, err := proto.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			in = append(protowire.AppendVarint([]byte("HDTS\x01"), uint64(len(body))), body...)
		}
		c, err := ParseCredentials(in)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var got []string
		for alias, tok := range c.Tokens() {
			got = append(got, alias+"="+tok.Kind)
		}
		if !slices.Equal(got, wantToks) {
			t.Errorf("%s tokens %v, want %v", f, got, wantToks)
		}
		if s, _ := c.Secret("s"); c.NumSecrets() != 1 || !bytes.Equal(s, []byte{2}) {
			t.Errorf("%s secrets %v", f, dump(c))
		}
	}
}

func TestAddTokenReplacesInPlaceAndRemoveTokenRemoves(t *testing.T) {
	c := &Credentials{}
	c.AddToken("a", Token{Kind: "A"})
	c.AddToken("b", Token{Kind: "B"})
	c.AddToken("a", Token{Kind: "A2"})
	if got := aliases(c); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("aliases %v", got)
	}
	if tok, ok := c.Token("a"); !ok || tok.Kind != "A2" {
		t.Errorf(`Token("a") = %v, %v`, tok, ok)
	}
	if _, ok := c.Token("missing"); ok {
		t.Error(`Token("missing") found something`)
	}
	if !c.RemoveToken("a") || c.RemoveToken("a") {
		t.Error("RemoveToken should remove once")
	}
	if got := aliases(c); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after remove, aliases %v", got)
	}
}

func TestTokensOfKindFindsAndRemovesByKind(t *testing.T) {
	c := &Credentials{}
	c.AddToken("", Token{Kind: "YARN_AM_RM_TOKEN"})
	c.AddToken("nn", Token{Kind: "HDFS_DELEGATION_TOKEN", Service: "nn1"})
	c.AddToken("nn2", Token{Kind: "HDFS_DELEGATION_TOKEN", Service: "nn2"})

	found := maps.Collect(c.TokensOfKind("HDFS_DELEGATION_TOKEN"))
	if len(found) != 2 || found["nn"].Service != "nn1" || found["nn2"].Service != "nn2" {
		t.Errorf("TokensOfKind = %v", found)
	}
	if n := len(maps.Collect(c.TokensOfKind("nothing"))); n != 0 {
		t.Errorf("TokensOfKind(nothing) found %d", n)
	}
	if n := c.RemoveTokensOfKind("YARN_AM_RM_TOKEN"); n != 1 {
		t.Errorf("RemoveTokensOfKind removed %d, want 1", n)
	}
	if got := aliases(c); !slices.Equal(got, []string{"nn", "nn2"}) {
		t.Errorf("aliases %v", got)
	}
}

func TestIteratorsSurviveChangesDuringTheLoop(t *testing.T) {
	c := sample()
	var seen []string
	for alias := range c.Tokens() {
		seen = append(seen, alias)
		c.RemoveToken(alias)
		c.AddToken("new-"+alias, Token{})
	}
	if !slices.Equal(seen, []string{"", "hdfs", "odd"}) {
		t.Errorf("loop saw %q", seen)
	}
	for alias := range c.Secrets() {
		c.RemoveSecret(alias)
	}
	if c.NumSecrets() != 0 {
		t.Errorf("%d secrets left", c.NumSecrets())
	}
	for range c.Tokens() {
		break // stopping early must not panic
	}
}

func TestSecretsAreStoredAndReturnedAsCopies(t *testing.T) {
	c := &Credentials{}
	in := []byte("s3cr3t")
	c.AddSecret("k", in)
	in[0] = 'X'
	got, ok := c.Secret("k")
	if !ok || string(got) != "s3cr3t" {
		t.Fatalf(`Secret("k") = %q, %v`, got, ok)
	}
	got[0] = 'Y'
	if again, _ := c.Secret("k"); string(again) != "s3cr3t" {
		t.Errorf("Secret returned shared memory: %q", again)
	}
	if _, ok := c.Secret("missing"); ok {
		t.Error(`Secret("missing") found something`)
	}
	if !c.RemoveSecret("k") || c.RemoveSecret("k") {
		t.Error("RemoveSecret should remove once")
	}
}

func TestTokensAreStoredAndReturnedAsCopies(t *testing.T) {
	c := &Credentials{}
	tok := Token{Identifier: []byte{1}, Password: []byte{2}}
	c.AddToken("t", tok)
	tok.Identifier[0] = 9
	got, _ := c.Token("t")
	got.Password[0] = 9
	for _, it := range c.Tokens() {
		it.Identifier[0] = 7
	}
	if again, _ := c.Token("t"); again.Identifier[0] != 1 || again.Password[0] != 2 {
		t.Errorf("stored token changed to %v", again)
	}
}

func TestCloneIsDeepAndEqual(t *testing.T) {
	c := sample()
	d := c.Clone()
	if !d.Equal(c) {
		t.Fatalf("clone %v differs", dump(d))
	}
	d.AddToken("", Token{Kind: "other"})
	if d.Equal(c) {
		t.Error("changing the clone left it equal")
	}
	if tok, _ := c.Token(""); tok.Kind != "YARN_AM_RM_TOKEN" {
		t.Error("changing the clone changed the original")
	}
	var nilCreds *Credentials
	if !nilCreds.Clone().Equal(&Credentials{}) || !nilCreds.Equal(nil) {
		t.Error("nil should clone and compare as empty")
	}
}

func TestEqualIsOrderSensitive(t *testing.T) {
	a, b := &Credentials{}, &Credentials{}
	a.AddToken("x", Token{})
	a.AddToken("y", Token{})
	b.AddToken("y", Token{})
	b.AddToken("x", Token{})
	if a.Equal(b) {
		t.Error("different orders compare equal")
	}
}

func TestNilCredentialsReadAsEmpty(t *testing.T) {
	var c *Credentials
	if c.NumTokens() != 0 || c.NumSecrets() != 0 {
		t.Error("nil has entries")
	}
	if _, ok := c.Token(""); ok {
		t.Error("nil has a token")
	}
	if _, ok := c.Secret(""); ok {
		t.Error("nil has a secret")
	}
	for range c.Tokens() {
		t.Error("nil yields tokens")
	}
	for range c.Secrets() {
		t.Error("nil yields secrets")
	}
	if p := c.Proto(); len(p.GetTokens())+len(p.GetSecrets()) != 0 {
		t.Error("nil has a non-empty proto")
	}
}

func TestCredentialsFromProtoReadsMissingTokenAndSecretAsEmpty(t *testing.T) {
	p := &commonpb.CredentialsProto{
		Tokens:  []*commonpb.CredentialsKVProto{{Alias: proto.String("t")}, nil},
		Secrets: []*commonpb.CredentialsKVProto{{Alias: proto.String("s")}},
	}
	c := CredentialsFromProto(p)
	want := &Credentials{}
	want.AddToken("t", Token{})
	want.AddToken("", Token{})
	want.AddSecret("s", nil)
	if !c.Equal(want) {
		t.Errorf("got %v, want %v", dump(c), dump(want))
	}
	if s, ok := c.Secret("s"); !ok || s == nil {
		t.Errorf(`Secret("s") = %#v, %v; want non-nil empty`, s, ok)
	}
}

func TestMarshalRejectsUnknownFormat(t *testing.T) {
	if _, err := sample().Marshal(Format(7)); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("err %v, want ErrUnknownFormat", err)
	}
}

func TestWriteToReportsWriterErrors(t *testing.T) {
	boom := errors.New("disk full")
	if _, err := sample().WriteTo(failingWriter{boom}); !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "token: write credentials: ") {
		t.Errorf("err %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestFormatNamesFollowHadoop(t *testing.T) {
	for f, want := range map[Format]string{FormatWritable: "WRITABLE", FormatProtobuf: "PROTOBUF", 9: "Format(9)"} {
		if got := f.String(); got != want {
			t.Errorf("Format(%d).String() = %q, want %q", byte(f), got, want)
		}
	}
}

func aliases(c *Credentials) []string {
	var out []string
	for alias := range c.Tokens() {
		out = append(out, alias)
	}
	return out
}

// dump describes c for failure messages.
func dump(c *Credentials) string {
	if c == nil {
		return "<nil>"
	}
	var sb strings.Builder
	for alias, tok := range c.Tokens() {
		sb.WriteString("token " + strconv.Quote(alias) + ": " + tok.String() + "; ")
	}
	for alias, s := range c.Secrets() {
		sb.WriteString("secret " + strconv.Quote(alias) + ": " + hex.EncodeToString(s) + "; ")
	}
	return sb.String()
}

// The bulk adds give what adding each in turn gives: a repeated alias keeps
// its first place and its last value, existing aliases included.
func TestBulkAddsAreAddingEachInTurn(t *testing.T) {
	tok := func(id string) Token { return Token{Identifier: []byte(id), Kind: "K", Service: "s"} }
	start := func() *Credentials {
		c := &Credentials{}
		c.AddToken("b", tok("old-b"))
		c.AddSecret("y", []byte("old-y"))
		return c
	}
	tokens := []Aliased[Token]{{"a", tok("1")}, {"b", tok("2")}, {"c", tok("3")}, {"a", tok("4")}}
	secrets := []Aliased[[]byte]{{"x", []byte("1")}, {"y", []byte("2")}, {"x", []byte("3")}}
	each, bulk := start(), start()
	for _, e := range tokens {
		each.AddToken(e.Alias, e.Value)
	}
	for _, e := range secrets {
		each.AddSecret(e.Alias, e.Value)
	}
	bulk.AddTokens(tokens)
	bulk.AddSecrets(secrets)
	if !bulk.Equal(each) {
		t.Errorf("bulk %v, each in turn %v", bulk, each)
	}
	tokens[0].Value.Identifier[0] = 'x'
	if got, _ := bulk.Token("a"); string(got.Identifier) != "4" {
		t.Errorf("token a is %q after its input changed", got.Identifier)
	}
}
