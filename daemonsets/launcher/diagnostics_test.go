package launcher

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const cid = "container_1700000000000_0001_01_000002"

func TestDiagnosticsAreTheNodeManagers(t *testing.T) {
	mrMissing := "Error: Could not find or load main class org.apache.hadoop.mapreduce.v2.app.MRAppMaster\n"
	tests := []struct {
		name   string
		code   int
		stderr string
		ef     *errorFile
		want   string
	}{
		{
			name: "a failure quotes the launch script's stderr and the error file",
			code: 1, stderr: "bash: job.sh: No such file\n",
			ef: &errorFile{name: "stderr", tail: []byte("Exception in thread main\n")},
			want: "Exception from container-launch.\nContainer id: " + cid + "\nExit code: 1\n\n" +
				"Container exited with a non-zero exit code 1. Error file: prelaunch.err.\n" +
				"Last 4096 bytes of prelaunch.err :\nbash: job.sh: No such file\n" +
				"Last 4096 bytes of stderr :\nException in thread main\n\n",
		},
		{
			name: "without an error file only the launch script's stderr is quoted",
			code: 7, stderr: "oops",
			want: "Exception from container-launch.\nContainer id: " + cid + "\nExit code: 7\n\n" +
				"Container exited with a non-zero exit code 7. Error file: prelaunch.err.\n" +
				"Last 4096 bytes of prelaunch.err :\noops",
		},
		{
			name: "several error files are named and the newest quoted",
			code: 2, stderr: "no newline",
			ef: &errorFile{names: []string{"stderr", "stderr.1"}, name: "stderr.1", tail: []byte("x")},
			want: "Exception from container-launch.\nContainer id: " + cid + "\nExit code: 2\n\n" +
				"Container exited with a non-zero exit code 2. Error file: prelaunch.err.\n" +
				"Last 4096 bytes of prelaunch.err :\nno newline\n" +
				"Error files: stderr, stderr.1.\nLast 4096 bytes of stderr.1 :\nx\n",
		},
		{
			name: "a MapReduce class that cannot be found gets YARN's hint",
			code: 1, ef: &errorFile{name: "stderr", tail: []byte(mrMissing)},
			want: "Exception from container-launch.\nContainer id: " + cid + "\nExit code: 1\n\n" +
				"Container exited with a non-zero exit code 1. Error file: prelaunch.err.\n" +
				"Last 4096 bytes of prelaunch.err :\n" +
				"Last 4096 bytes of stderr :\n" + mrMissing + "\n" +
				"Please check whether your <HADOOP_HOME>/etc/hadoop/mapred-site.xml contains the below configuration:\n" +
				"<property>\n  <name>yarn.app.mapreduce.am.env</name>\n  <value>HADOOP_MAPRED_HOME=${full path of your hadoop distribution directory}</value>\n</property>\n" +
				"<property>\n  <name>mapreduce.map.env</name>\n  <value>HADOOP_MAPRED_HOME=${full path of your hadoop distribution directory}</value>\n</property>\n" +
				"<property>\n  <name>mapreduce.reduce.env</name>\n  <value>HADOOP_MAPRED_HOME=${full path of your hadoop distribution directory}</value>\n</property>\n",
		},
		{
			name: "SIGTERM is a kill on request",
			code: 143, stderr: "ignored", ef: &errorFile{name: "stderr", tail: []byte("ignored")},
			want: "Container killed on request. Exit code is 143\nContainer exited with a non-zero exit code 143. \n",
		},
		{
			name: "SIGKILL is a kill on request",
			code: 137,
			want: "Container killed on request. Exit code is 137\nContainer exited with a non-zero exit code 137. \n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diagnostics(cid, tt.code, []byte(tt.stderr), tt.ef); got != tt.want {
				t.Errorf("diagnostics:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

func TestDiagnosticsFitTheKubeletsLimit(t *testing.T) {
	long := func(c string) []byte { return []byte(strings.Repeat(c, tailBytes-1) + "END") }
	tests := []struct {
		name    string
		stderr  []byte
		ef      *errorFile
		endings []string // each quoted text keeps its end
	}{
		{name: "two long tails share the room", stderr: long("a"), ef: &errorFile{name: "stderr", tail: long("b")}, endings: []string{"aEND", "bEND"}},
		{name: "a short tail leaves the rest to the long one", stderr: []byte("short\n"), ef: &errorFile{name: "stderr", tail: long("b")}, endings: []string{"short\n", "bEND"}},
		{name: "a long stderr alone", stderr: long("a"), endings: []string{"aEND"}},
		{name: "cuts fall between characters", stderr: long("é"), ef: &errorFile{name: "stderr", tail: long("€")}, endings: []string{"éEND", "€END"}},
		{name: "a very long list of error files", stderr: long("a"), ef: &errorFile{names: slices.Repeat([]string{strings.Repeat("stderr", 20)}, 100), name: "stderr", tail: long("b")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diagnostics(cid, 1, tt.stderr, tt.ef)
			if len(got) > maxMessageBytes {
				t.Errorf("%d bytes, over %d", len(got), maxMessageBytes)
			}
			if len(got) < maxMessageBytes-8 {
				t.Errorf("%d bytes, room left unused", len(got))
			}
			if !utf8.ValidString(got) {
				t.Error("not UTF-8")
			}
			if !strings.HasPrefix(got, "Exception from container-launch.\nContainer id: "+cid) {
				t.Errorf("the heading is gone: %.100q", got)
			}
			for _, e := range tt.endings {
				if !strings.Contains(got, e) {
					t.Errorf("%q is gone", e)
				}
			}
		})
	}
}

func TestReadErrorFileTakesTheNewestMatchAndItsTail(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // name → content, oldest first by name order
		want  *errorFile
	}{
		{name: "no log folder content", files: nil, want: nil},
		{name: "no file matches", files: map[string]string{"stdout": "x", "prelaunch.err": "y", "syslog": "z"}, want: nil},
		{name: "one match", files: map[string]string{"stderr": "boom\n", "stdout": "x"}, want: &errorFile{name: "stderr", tail: []byte("boom\n")}},
		{
			name:  "the newest of several, all named",
			files: map[string]string{"1-stderr": "old", "2-STDERR": "new"},
			want:  &errorFile{names: []string{"1-stderr", "2-STDERR"}, name: "2-STDERR", tail: []byte("new")},
		},
		{name: "the last bytes of a big file", files: map[string]string{"stderr": strings.Repeat("x", 10000) + "END"}, want: &errorFile{name: "stderr", tail: []byte(strings.Repeat("x", tailBytes-3) + "END")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			names := make([]string, 0, len(tt.files))
			for name := range tt.files {
				names = append(names, name)
			}
			slices.Sort(names)
			mtime := time.Now().Add(-time.Hour)
			for _, name := range names {
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(tt.files[name]), 0o600); err != nil {
					t.Fatal(err)
				}
				mtime = mtime.Add(time.Minute)
				if err := os.Chtimes(path, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readErrorFile(dir)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) {
				t.Fatalf("readErrorFile = %+v, want %+v", got, tt.want)
			}
			if got != nil && (got.name != tt.want.name || !slices.Equal(got.names, tt.want.names) || !bytes.Equal(got.tail, tt.want.tail)) {
				t.Errorf("readErrorFile = %q %q %.40q, want %q %q %.40q", got.names, got.name, got.tail, tt.want.names, tt.want.name, tt.want.tail)
			}
		})
	}
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{name: "less than the room", writes: []string{"ab", "c"}, want: "abc"},
		{name: "over the room across writes", writes: []string{"abc", "de", "f"}, want: "cdef"},
		{name: "one write over the room", writes: []string{"abcdefgh"}, want: "efgh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := &tail{n: 4}
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if string(tl.buf) != tt.want {
				t.Errorf("tail %q, want %q", tl.buf, tt.want)
			}
		})
	}
}
