package mapred

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/test/recordings"
)

// The recorded job's names and secret (hadoop-shuffle/README.md).
const (
	recordedJob    = "job_1795680442682_0003"
	recordedSecret = "758caf0ff92aba64"
	recordedPort   = 13562
	recordedMaps   = 3
)

func recordedAttempt(i int) string { return fmt.Sprintf("attempt_1795680442682_0003_m_%06d_0", i) }

func secret(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(recordedSecret)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readRecording(t *testing.T, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(recordings.Path(t, append([]string{"hadoop-shuffle"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordedMapOutput is a recorded map's file.out and its parsed index.
func recordedMapOutput(t *testing.T, attempt string) ([]byte, []IndexRecord) {
	t.Helper()
	file := readRecording(t, "map-output", attempt+".file.out")
	index, err := ParseIndex(readRecording(t, "map-output", attempt+".file.out.index"))
	if err != nil {
		t.Fatal(err)
	}
	return file, index
}

func TestRecordedMapOutputsParseAndAreRewrittenByteForByte(t *testing.T) {
	for i := range recordedMaps {
		attempt := recordedAttempt(i)
		t.Run(attempt, func(t *testing.T) {
			file, index := recordedMapOutput(t, attempt)
			if len(index) != 3 {
				t.Fatalf("%d index records, want one per reducer (3)", len(index))
			}
			var rewritten []*SegmentWriter
			for p, rec := range index {
				if rec.PartLength != rec.RawLength+ChecksumSize {
					t.Errorf("partition %d: part length %d, raw length %d: want raw + the checksum", p, rec.PartLength, rec.RawLength)
				}
				seg := file[rec.StartOffset : rec.StartOffset+rec.PartLength]
				records, err := ParseSegment(seg)
				if err != nil {
					t.Fatalf("partition %d: %v", p, err)
				}
				if len(records) == 0 {
					t.Errorf("partition %d is empty", p)
				}
				w := &SegmentWriter{}
				var prev []byte
				for _, r := range records {
					word, err := ParseText(r.Key)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := ParseInt(r.Value); err != nil {
						t.Fatal(err)
					}
					if got := Partition(word, len(index)); got != p {
						t.Errorf("%q is in partition %d, HashPartitioner puts it in %d", word, p, got)
					}
					if prev != nil && CompareText(prev, r.Key) >= 0 {
						t.Errorf("partition %d: %q after %q, not sorted", p, r.Key, prev)
					}
					prev = r.Key
					w.Append(r.Key, r.Value)
				}
				rewritten = append(rewritten, w)
			}
			out := BuildMapOutput(rewritten)
			if !bytes.Equal(out.File, file) {
				t.Errorf("rewritten file.out differs from the recording:\n got %x\nwant %x", out.File, file)
			}
			if !slices.Equal(out.Index, index) {
				t.Errorf("rewritten index %v, recorded %v", out.Index, index)
			}
			if got, want := MarshalIndex(out.Index), readRecording(t, "map-output", attempt+".file.out.index"); !bytes.Equal(got, want) {
				t.Errorf("MarshalIndex:\n got %x\nwant %x", got, want)
			}
		})
	}
}

func TestTheRecordedFirstMapsIndexHoldsTheREADMEsOffsets(t *testing.T) {
	_, index := recordedMapOutput(t, recordedAttempt(0))
	want := []IndexRecord{{0, 102, 106}, {106, 154, 158}, {264, 109, 113}}
	if !slices.Equal(index, want) {
		t.Errorf("index %v, want %v", index, want)
	}
}

// fetch is one row of fetcher/index.tsv.
type fetch struct {
	n, uri, status         string
	contentLength          int
	urlHash, replyHash     string
	reduce                 int
	maps                   []string
	requestURL, requestRaw *url.URL
}

func recordedFetches(t *testing.T) []fetch {
	t.Helper()
	var out []fetch
	lines := strings.Split(strings.TrimSpace(string(readRecording(t, "fetcher", "index.tsv"))), "\n")
	for _, line := range lines[1:] {
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			t.Fatalf("index.tsv line %q", line)
		}
		cl, err := strconv.Atoi(f[4])
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse("http://localhost:" + strconv.Itoa(recordedPort) + f[2])
		if err != nil {
			t.Fatal(err)
		}
		reduce, err := strconv.Atoi(u.Query().Get("reduce"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fetch{n: f[0], uri: f[2], status: f[3], contentLength: cl, urlHash: f[5], replyHash: f[6],
			reduce: reduce, maps: strings.Split(u.Query().Get("map"), ","), requestURL: u})
	}
	if len(out) != 5 {
		t.Fatalf("%d recorded fetches, want 5", len(out))
	}
	return out
}

func TestHashesOfEveryRecordedFetchAreReproduced(t *testing.T) {
	key := secret(t)
	for _, f := range recordedFetches(t) {
		t.Run(f.n, func(t *testing.T) {
			if got := MapOutputURL("localhost", recordedPort, recordedJob, f.reduce, f.maps); got != f.requestURL.String() {
				t.Errorf("MapOutputURL %s, recorded %s", got, f.requestURL)
			}
			msg, err := HashMessage(f.requestURL)
			if err != nil {
				t.Fatal(err)
			}
			if want := strconv.Itoa(recordedPort) + f.uri; msg != want {
				t.Errorf("hash message %q, want %q", msg, want)
			}
			urlHash, err := URLHash(key, f.requestURL)
			if err != nil {
				t.Fatal(err)
			}
			if urlHash != f.urlHash {
				t.Errorf("UrlHash %s, recorded %s", urlHash, f.urlHash)
			}
			if got := ReplyHash(key, f.urlHash); got != f.replyHash {
				t.Errorf("ReplyHash %s, recorded %s", got, f.replyHash)
			}
			if !VerifyHash(key, f.urlHash, msg) {
				t.Error("VerifyHash refuses the recorded UrlHash")
			}
			if VerifyHash([]byte("forged!!"), f.urlHash, msg) {
				t.Error("VerifyHash accepts the recorded UrlHash under another secret")
			}

			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(readRecording(t, "fetcher", f.n+"-request.bin"))))
			if err != nil {
				t.Fatal(err)
			}
			if req.RequestURI != f.uri || req.Header.Get(HeaderURLHash) != f.urlHash ||
				req.Header.Get(HeaderName) != ShuffleName || req.Header.Get(HeaderVersion) != ShuffleVersion {
				t.Errorf("recorded request %s %v does not match index.tsv and the shuffle's headers", req.RequestURI, req.Header)
			}
		})
	}
}

func TestRecordedFetcherResponsesParseIntoTheMapsSegments(t *testing.T) {
	key := secret(t)
	for _, f := range recordedFetches(t) {
		t.Run(f.n, func(t *testing.T) {
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(readRecording(t, "fetcher", f.n+"-response.bin"))), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(f.contentLength) {
				t.Errorf("status %d content length %d, recorded %s %d", resp.StatusCode, resp.ContentLength, f.status, f.contentLength)
			}
			if resp.Header.Get(HeaderName) != ShuffleName || resp.Header.Get(HeaderVersion) != ShuffleVersion {
				t.Errorf("name/version headers %v", resp.Header)
			}
			if !VerifyHash(key, resp.Header.Get(HeaderReplyHash), f.urlHash) {
				t.Errorf("ReplyHash %s does not verify", resp.Header.Get(HeaderReplyHash))
			}
			maps, err := ReadResponse(resp.Body, len(f.maps), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if rest, _ := io.ReadAll(resp.Body); len(rest) != 0 {
				t.Errorf("%d bytes after the last map", len(rest))
			}
			size := 0
			for i, m := range maps {
				if m.Header.MapID != f.maps[i] || int(m.Header.ForReduce) != f.reduce {
					t.Errorf("map %d: header %+v, want map %s reduce %d", i, m.Header, f.maps[i], f.reduce)
				}
				file, index := recordedMapOutput(t, m.Header.MapID)
				rec := index[f.reduce]
				if m.Header.CompressedLength != rec.PartLength || m.Header.RawLength != rec.RawLength {
					t.Errorf("map %s: header lengths %d/%d, index %+v", m.Header.MapID, m.Header.CompressedLength, m.Header.RawLength, rec)
				}
				if !bytes.Equal(m.Segment, file[rec.StartOffset:rec.StartOffset+rec.PartLength]) {
					t.Errorf("map %s: segment differs from file.out at the index's offset", m.Header.MapID)
				}
				if _, err := ParseSegment(m.Segment); err != nil {
					t.Errorf("map %s: %v", m.Header.MapID, err)
				}
				size += len(m.Header.AppendTo(nil)) + len(m.Segment)
			}
			if size != f.contentLength {
				t.Errorf("headers and segments add up to %d bytes, content length %d", size, f.contentLength)
			}
		})
	}
}

func TestServiceDataIsTheRecordedTokenForTheJobsSecret(t *testing.T) {
	creds, err := token.ParseCredentials(readRecording(t, "job-token", "task-container.tokens"))
	if err != nil {
		t.Fatal(err)
	}
	shuffleSecret, ok := creds.Secret(ShuffleSecretAlias)
	if !ok || hex.EncodeToString(shuffleSecret) != recordedSecret {
		t.Fatalf("task credentials' %s = %x, want %s", ShuffleSecretAlias, shuffleSecret, recordedSecret)
	}
	jobToken, ok := creds.Token(JobTokenAlias)
	if !ok || jobToken.Kind != JobTokenKind || jobToken.Service != recordedJob ||
		!bytes.Equal(jobToken.Identifier, JobToken(recordedJob, nil).Identifier) {
		t.Errorf("task credentials' job token %v, want kind %s for %s", jobToken, JobTokenKind, recordedJob)
	}

	recorded := readRecording(t, "nm-rpc", "service_data.mapreduce_shuffle.bin")
	if got := ServiceData(recordedJob, shuffleSecret); !bytes.Equal(got, recorded) {
		t.Errorf("ServiceData:\n got %x\nwant %x", got, recorded)
	}
	job, s, err := ParseServiceData(recorded)
	if err != nil || job != recordedJob || !bytes.Equal(s, shuffleSecret) {
		t.Errorf("ParseServiceData = %q, %x, %v", job, s, err)
	}
}

func TestShufflePortIsTheRecordedMetadata(t *testing.T) {
	recorded := readRecording(t, "nm-rpc", "services_meta_data.mapreduce_shuffle.bin")
	port, err := ParsePort(recorded)
	if err != nil || port != DefaultPort {
		t.Errorf("ParsePort = %d, %v; want %d", port, err, DefaultPort)
	}
	if got := MarshalPort(DefaultPort); !bytes.Equal(got, recorded) {
		t.Errorf("MarshalPort = %x, recorded %x", got, recorded)
	}
}

func TestRecordedMapOutputFoldersAreNamedByAttemptIDs(t *testing.T) {
	dir := recordings.Path(t, "hadoop-shuffle", "map-output")
	names, err := filepath.Glob(filepath.Join(dir, "*.file.out"))
	if err != nil || len(names) != recordedMaps {
		t.Fatalf("%v %v", names, err)
	}
	for _, n := range names {
		id := strings.TrimSuffix(filepath.Base(n), ".file.out")
		a, err := ParseAttemptID(id)
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != id || a.Task.Job.String() != recordedJob || a.Task.Type != Map {
			t.Errorf("%s parsed as %+v", id, a)
		}
	}
}
