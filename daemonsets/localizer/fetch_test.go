package localizer

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

const (
	typeFile    = yarnpb.LocalResourceTypeProto_FILE
	typeArchive = yarnpb.LocalResourceTypeProto_ARCHIVE
	typePattern = yarnpb.LocalResourceTypeProto_PATTERN
	visPublic   = yarnpb.LocalResourceVisibilityProto_PUBLIC
	visPrivate  = yarnpb.LocalResourceVisibilityProto_PRIVATE
	visApp      = yarnpb.LocalResourceVisibilityProto_APPLICATION
)

func TestResourceURLIsJavaURIOfURLProto(t *testing.T) {
	tests := []struct {
		name string
		in   *yarnpb.URLProto
		want string
	}{
		{"hdfs with port", &yarnpb.URLProto{Scheme: proto.String("hdfs"), Host: proto.String("nn"), Port: proto.Int32(8020), File: proto.String("/user/a/job.jar")}, "hdfs://nn:8020/user/a/job.jar"},
		{"port -1 is none", &yarnpb.URLProto{Scheme: proto.String("hdfs"), Host: proto.String("nn"), Port: proto.Int32(-1), File: proto.String("/a")}, "hdfs://nn/a"},
		{"port unset is none", &yarnpb.URLProto{Scheme: proto.String("hdfs"), Host: proto.String("nn"), File: proto.String("/a")}, "hdfs://nn/a"},
		{"file without host prints as file:/path", &yarnpb.URLProto{Scheme: proto.String("file"), Port: proto.Int32(-1), File: proto.String("/tmp/x.jar")}, "file:/tmp/x.jar"},
		{"path is quoted", &yarnpb.URLProto{Scheme: proto.String("file"), File: proto.String("/tmp/a b.jar")}, "file:/tmp/a%20b.jar"},
		{"user info", &yarnpb.URLProto{Scheme: proto.String("s3a"), UserInfo: proto.String("key:secret"), Host: proto.String("bucket"), File: proto.String("/p/f")}, "s3a://key:secret@bucket/p/f"},
		{"IPv6 host is bracketed", &yarnpb.URLProto{Scheme: proto.String("hdfs"), Host: proto.String("::1"), Port: proto.Int32(8020), File: proto.String("/x")}, "hdfs://[::1]:8020/x"},
		{"scheme is case-insensitive", &yarnpb.URLProto{Scheme: proto.String("HDFS"), Host: proto.String("nn"), File: proto.String("/x")}, "hdfs://nn/x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := resourceURL(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := resourceURL(&yarnpb.URLProto{File: proto.String("/x")}); err == nil {
		t.Error("a URL without scheme was accepted")
	}
}

// servers is an http server and an in-process S3 holding the same bytes.
type servers struct {
	http    *httptest.Server
	s3      *httptest.Server
	modTime time.Time
}

func newServers(t *testing.T, files map[string][]byte) *servers {
	t.Helper()
	s := &servers{modTime: time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC)}
	mux := http.NewServeMux()
	for name, data := range files {
		mux.HandleFunc("/files/"+name, func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, name, s.modTime, bytes.NewReader(data))
		})
		mux.HandleFunc("/nomtime/"+name, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(data)
		})
	}
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	})
	s.http = httptest.NewServer(mux)
	t.Cleanup(s.http.Close)

	backend := s3mem.New(s3mem.WithTimeSource(gofakes3.FixedTimeSource(s.modTime)))
	if err := backend.CreateBucket("bucket"); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if _, err := backend.PutObject("bucket", "dir/"+name, map[string]string{"Last-Modified": s.modTime.Format(http.TimeFormat)}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	s.s3 = httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s.s3.Close)
	return s
}

func (s *servers) s3Config(c *Config) {
	c.S3 = S3Config{Endpoint: s.s3.URL, PathStyle: true, Region: "us-east-1", AccessKeyID: "id", SecretAccessKey: "secret"}
}

func TestPrepareLocalizesFromEachSource(t *testing.T) {
	data := []byte("the job's jar")
	srv := newServers(t, map[string][]byte{"job.jar": data})
	e := newEnv(t, srv.s3Config)
	fileURL, size, ts := e.file("job.jar", data)
	mtime := srv.modTime.UnixMilli()
	tests := []struct {
		name, url string
		ts        int64
	}{
		{"file", fileURL, ts},
		{"http with Last-Modified", srv.http.URL + "/files/job.jar", mtime},
		{"http without Last-Modified, timestamp 0", srv.http.URL + "/nomtime/job.jar", 0},
		{"s3a", "s3a://bucket/dir/job.jar", mtime},
		{"s3", "s3://bucket/dir/job.jar", mtime},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := e.prepare(i+1, []kv{{"job.jar", lr(t, tc.url, size, tc.ts, typeFile, visPrivate, "")}}, nil)
			if f.Failure != "" {
				t.Fatalf("Failure: %s", f.Failure)
			}
			if got := readLink(t, f, "job.jar"); got != string(data) {
				t.Errorf("job.jar holds %q, want %q", got, data)
			}
		})
	}
}

// javaISO is Times.formatISO8601 in the node's zone.
func javaISO(ms int64) string {
	return time.UnixMilli(ms).Format("2006-01-02T15:04:05.000-0700")
}

func TestPrepareFailsWithYARNDiagnostics(t *testing.T) {
	data := []byte("0123456789")
	srv := newServers(t, map[string][]byte{"lib.jar": data})
	e := newEnv(t, srv.s3Config)
	fileURL, size, ts := e.file("lib.jar", data)
	privURL, _, privTS := e.file("private/secret.jar", data)
	if err := os.Chmod(strings.TrimPrefix(privURL, "file://"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(fileURL, "file://")
	now := fixedNow().UnixMilli()
	tests := []struct {
		name string
		res  *yarnpb.LocalResourceProto
		want string // the whole Failure, or a prefix ending in "…"
	}{
		{
			"changed timestamp is FSDownload's message",
			lr(t, fileURL, size, ts-1000, typeFile, visPublic, ""),
			fmt.Sprintf(`Resource file:%s changed on src filesystem - expected: "%s", was: "%s", current time: "%s"`,
				path, javaISO(ts-1000), javaISO(ts), javaISO(now)),
		},
		{
			"changed size",
			lr(t, fileURL, size+1, ts, typeFile, visPublic, ""),
			fmt.Sprintf("Resource file:%s changed on src filesystem - expected size: %d, was: %d", path, size+1, size),
		},
		{
			"missing file",
			lr(t, fileURL+".gone", size, ts, typeFile, visPrivate, ""),
			fmt.Sprintf("File file:%s.gone does not exist", path),
		},
		{
			"http without Last-Modified is time 0, as Hadoop's HttpFileSystem",
			lr(t, srv.http.URL+"/nomtime/lib.jar", size, 1000, typeFile, visPrivate, ""),
			fmt.Sprintf(`Resource %s/nomtime/lib.jar changed on src filesystem - expected: "%s", was: "%s", current time: "%s"`,
				srv.http.URL, javaISO(1000), javaISO(0), javaISO(now)),
		},
		{
			"http error status",
			lr(t, srv.http.URL+"/broken", size, 0, typeFile, visPrivate, ""),
			fmt.Sprintf("Failed to download resource %s/broken: Server returned HTTP response code: 500 for URL: %s/broken", srv.http.URL, srv.http.URL),
		},
		{
			"missing S3 key",
			lr(t, "s3a://bucket/dir/gone.jar", size, 0, typeFile, visPrivate, ""),
			"File s3a://bucket/dir/gone.jar does not exist",
		},
		{
			"unknown scheme",
			lr(t, "ftp://host/lib.jar", size, 0, typeFile, visPrivate, ""),
			`No FileSystem for scheme "ftp"`,
		},
		{
			"PUBLIC resource others cannot read",
			lr(t, privURL, size, privTS, typeFile, visPublic, ""),
			fmt.Sprintf("Resource file:%s is not publicly accessible and as such cannot be part of the public cache.", strings.TrimPrefix(privURL, "file://")),
		},
		{
			"bad pattern",
			lr(t, fileURL, size, ts, typePattern, visPrivate, "(unclosed"),
			`Invalid pattern "(unclosed" of resource file:` + path + "…",
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := e.prepare(i+1, []kv{{"lib.jar", tc.res}}, []byte("tokens"))
			if prefix, ok := strings.CutSuffix(tc.want, "…"); ok {
				if !strings.HasPrefix(f.Failure, prefix) {
					t.Errorf("Failure = %q, want it to start with %q", f.Failure, prefix)
				}
			} else if f.Failure != tc.want {
				t.Errorf("Failure = %q\nwant      %q", f.Failure, tc.want)
			}
			b, err := launch.EncodeFiles(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := launch.DecodeFiles(b); err != nil {
				t.Errorf("knit-launcher cannot read the failed container's files: %v", err)
			}
		})
	}
}
