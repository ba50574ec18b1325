package launch

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fullContext() Context {
	return Context{
		ContainerID:   "container_1700000000000_0001_01_000001",
		User:          "alice",
		NMHost:        "node1",
		NMPort:        8041,
		NMHTTPPort:    8042,
		LaunchContext: []byte{0x0a, 0x03, 'a', 'b', 'c', 0x00, 0xff},
		TokensSecret:  "container-1700000000000-0001-01-000001-tokens",
		AppSubmitTime: 1700000000123,
		WebProxyBase:  "/proxy/application_1700000000000_0001",
		Image:         "apache/hadoop:3.4.1",
	}
}

func fullFiles() Files {
	return Files{
		ContainerID:   "container_1700000000000_0001_01_000001",
		User:          "alice",
		NMHost:        "node1",
		NMPort:        8041,
		NMHTTPPort:    8042,
		LocalDirs:     []string{"/l1/usercache/alice/appcache/application_1700000000000_0001"},
		LocalUserDirs: []string{"/l1/usercache/alice/"},
		LogDirs:       []string{"/logs/application_1700000000000_0001/container_1700000000000_0001_01_000001"},
		WorkDir:       "/l1/usercache/alice/appcache/application_1700000000000_0001/container_1700000000000_0001_01_000001",
		TokenFile:     "/l1/usercache/alice/appcache/application_1700000000000_0001/container_1700000000000_0001_01_000001/container_tokens",
		HomeDir:       "/home/",
		AppSubmitTime: 1700000000123,
		WebProxyBase:  "/proxy/application_1700000000000_0001",
		AuxServices:   map[string][]byte{"mapreduce_shuffle": {0, 0, 0x34, 0x4a}},
		Whitelist:     []EnvVar{{Name: "JAVA_HOME", Value: "/usr/lib/jvm/java-11"}},
		Env:           []EnvVar{{Name: "CLASSPATH", Value: "{{PWD}}<CPS>*"}, {Name: "A", Value: `"quoted" é`}},
		Commands:      []string{"{{JAVA_HOME}}/bin/java", "1><LOG_DIR>/stdout"},
	}
}

func TestContextRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		c    Context
	}{
		{name: "every field", c: fullContext()},
		{name: "a task: no AM fields, no tokens, no image", c: Context{ContainerID: "container_1_0001_01_000002", User: "bob", LaunchContext: []byte{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := EncodeContext(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeContext(s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.c) {
				t.Errorf("round trip = %+v, want %+v", got, tt.c)
			}
		})
	}
}

func TestContextRejects(t *testing.T) {
	big := fullContext()
	big.LaunchContext = bytes.Repeat([]byte{1}, MaxContextBytes)
	tests := []struct {
		name   string
		encode func() (string, error)
		decode string
	}{
		{name: "a context over the annotation limit, encoding", encode: func() (string, error) { return EncodeContext(big) }},
		{name: "a context over the annotation limit, decoding", decode: `{"containerId":"c","user":"u","image":"` + strings.Repeat("x", MaxContextBytes) + `"}`},
		{name: "no container id", decode: `{"user":"u"}`},
		{name: "no user", decode: `{"containerId":"c"}`},
		{name: "not JSON", decode: `{"containerId":`},
		{name: "a field of the wrong type", decode: `{"containerId":"c","user":"u","nmPort":"8041"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.encode != nil {
				_, err = tt.encode()
			} else {
				_, err = DecodeContext(tt.decode)
			}
			if err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestFilesRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    Files
	}{
		{name: "every field", f: fullFiles()},
		{name: "a localization failure needs no work folder", f: Files{ContainerID: "container_1_0001_01_000002", Failure: "Resource changed on src filesystem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeFiles(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeFiles(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.f) {
				t.Errorf("round trip = %+v, want %+v", got, tt.f)
			}
		})
	}
}

func TestDecodeFilesRejects(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{name: "no container id", doc: `{"workDir":"/w"}`},
		{name: "no work folder and no failure", doc: `{"containerId":"c"}`},
		{name: "not JSON", doc: `{"containerId":"c","workDir":"/w"`},
		{name: "a field of the wrong type", doc: `{"containerId":"c","workDir":"/w","commands":"true"}`},
		{name: "over the size limit", doc: `{"containerId":"c","workDir":"/w","failure":"` + strings.Repeat("x", MaxFilesBytes) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeFiles([]byte(tt.doc)); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestFilesPathIsUnderThePodsFolder(t *testing.T) {
	if got, want := FilesPath("/knit/launch", "uid-1"), filepath.Join("/knit/launch", "uid-1", "launch.json"); got != want {
		t.Errorf("FilesPath = %q, want %q", got, want)
	}
}

// FuzzDecodeFiles feeds DecodeFiles what a broken or hostile writer of the
// launch folder could leave there: it must not panic, must hold to its
// size limit, and what it accepts must survive encoding again.
func FuzzDecodeFiles(f *testing.F) {
	full, err := EncodeFiles(fullFiles())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(full),
		`{"containerId":"c","failure":"boom"}`,
		`{"containerId":"c","workDir":"/w","auxServices":{"x":"AAA0Sg=="},"env":[{"name":"A","value":"$B"}]}`,
		`{"containerId":"c","workDir":"/w","auxServices":{"x":"not base64"}}`,
		`{"containerId":"c","workDir":"/w","nmPort":1e99}`,
		`null`, `[]`, `{}`, ``, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeFiles(b)
		if err != nil {
			return
		}
		if len(b) > MaxFilesBytes {
			t.Fatalf("accepted %d bytes, over the limit", len(b))
		}
		if got.ContainerID == "" || got.Failure == "" && got.WorkDir == "" {
			t.Fatalf("accepted %+v", got)
		}
		again, err := EncodeFiles(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) > MaxFilesBytes {
			return // JSON escapes may grow a document past the limit
		}
		back, err := DecodeFiles(again)
		if err != nil {
			t.Fatalf("re-encoded files do not decode: %v", err)
		}
		if twice, _ := EncodeFiles(back); !bytes.Equal(twice, again) {
			t.Fatalf("encoding is not stable:\n%s\n%s", again, twice)
		}
	})
}

// FuzzDecodeContext does the same for the pod annotation, which anyone who
// may patch the pod can write.
func FuzzDecodeContext(f *testing.F) {
	full, err := EncodeContext(fullContext())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		full,
		`{"containerId":"c","user":"u"}`,
		`{"containerId":"c","user":"u","launchContext":"!!"}`,
		`{"containerId":"c","user":"u","nmPort":2147483648}`,
		`null`, `{}`, ``, "\xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeContext(s)
		if err != nil {
			return
		}
		if len(s) > MaxContextBytes {
			t.Fatalf("accepted %d bytes, over the limit", len(s))
		}
		if got.ContainerID == "" || got.User == "" {
			t.Fatalf("accepted %+v", got)
		}
		again, err := EncodeContext(got)
		if err != nil {
			return // over the limit once JSON escapes grew it
		}
		back, err := DecodeContext(again)
		if err != nil {
			t.Fatalf("re-encoded context does not decode: %v", err)
		}
		if twice, _ := EncodeContext(back); twice != again {
			t.Fatalf("encoding is not stable:\n%s\n%s", again, twice)
		}
	})
}
