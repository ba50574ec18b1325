package logs

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
	"github.com/knitdev/knit/rks/launch"
)

func TestFileFilterFindsPatternsInNamesAsLogValueDoes(t *testing.T) {
	tests := []struct {
		name string
		ctx  *launch.LogAggregationContext
		// kept lists which of stdout, stderr, syslog, syslog.1, gc.log
		// the final and the rolled filter keep; rolled nil means no
		// rolling.
		final  []string
		rolled []string
	}{
		{name: "no context keeps every file", ctx: nil, final: []string{"stdout", "stderr", "syslog", "syslog.1", "gc.log"}},
		{name: "an include pattern is found anywhere in the name, not matched whole",
			ctx: &launch.LogAggregationContext{IncludePattern: "std"}, final: []string{"stdout", "stderr"}},
		{name: "exclude wins over include",
			ctx: &launch.LogAggregationContext{IncludePattern: ".*", ExcludePattern: "err|gc"}, final: []string{"stdout", "syslog", "syslog.1"}},
		{name: "anchors anchor",
			ctx: &launch.LogAggregationContext{IncludePattern: "^syslog$"}, final: []string{"syslog"}},
		{name: "a rolled include pattern turns rolling on with its own filter",
			ctx:   &launch.LogAggregationContext{RolledLogsIncludePattern: `syslog\.\d+`},
			final: []string{"stdout", "stderr", "syslog", "syslog.1", "gc.log"}, rolled: []string{"syslog.1"}},
		{name: "a rolled exclude pattern alone does not turn rolling on",
			ctx: &launch.LogAggregationContext{RolledLogsExcludePattern: "std"}, final: []string{"stdout", "stderr", "syslog", "syslog.1", "gc.log"}},
	}
	names := []string{"stdout", "stderr", "syslog", "syslog.1", "gc.log"}
	pick := func(f fileFilter) []string {
		var out []string
		for _, n := range names {
			if f.keep(n) {
				out = append(out, n)
			}
		}
		return out
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := filtersOf(tc.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := pick(fs.final); !slices.Equal(got, tc.final) {
				t.Errorf("final keeps %v, want %v", got, tc.final)
			}
			switch {
			case tc.rolled == nil && fs.rolled != nil:
				t.Errorf("rolling on, keeping %v", pick(*fs.rolled))
			case tc.rolled != nil && fs.rolled == nil:
				t.Error("rolling off")
			case tc.rolled != nil:
				if got := pick(*fs.rolled); !slices.Equal(got, tc.rolled) {
					t.Errorf("rolled keeps %v, want %v", got, tc.rolled)
				}
			}
		})
	}
}

func TestPatternsGoCannotReadUploadMoreNeverLessAndNeverRoll(t *testing.T) {
	fs, err := filtersOf(&launch.LogAggregationContext{IncludePattern: `(a)\1`, ExcludePattern: `(?!x)`, RolledLogsIncludePattern: `(?<=y)z`})
	if err == nil {
		t.Fatal("unreadable patterns were not reported")
	}
	if !fs.final.keep("anything") {
		t.Error("a file was left out by a pattern that could not be read")
	}
	if fs.rolled != nil {
		t.Error("rolling is on with an unreadable include pattern: it would delete every file it uploads")
	}
}

// localRemote is a remote app log dir in a local folder, with the layout
// of format.
func localRemote(t *testing.T, format aggregated.Format) (string, aggregated.Layout) {
	remote := t.TempDir()
	return remote, aggregated.LayoutFor(format, func(k string) (string, bool) {
		if k == aggregated.ConfRemoteDir {
			return "file://" + remote, true
		}
		return "", false
	})
}

// aggregatedFiles reads every file of the application's remote folder:
// file name → its logs, keyed as laidOut.
func aggregatedFiles(t *testing.T, remote string, layout aggregated.Layout, format aggregated.Format) map[string]map[string]string {
	t.Helper()
	appDir, err := layout.AppDir("alice", endedApp)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(remote, strings.TrimPrefix(appDir, "file://"+remote))
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			continue // being written
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		r, err := aggregated.Open(format, bytes.NewReader(b), int64(len(b)), time.Now())
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[e.Name()] = contents(t, r)
	}
	return out
}

func TestFinalAggregationUploadsWhatThePatternsPickAndRemovesTheRest(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  launch.LogAggregationContext
		want map[string]map[string]string
	}{
		{name: "include stdout", ctx: launch.LogAggregationContext{IncludePattern: "stdout"},
			want: map[string]map[string]string{"127.0.1.1_8041": {"000001/stdout": "am out\n", "000002/stdout": "task out\n"}}},
		{name: "exclude stdout leaves only the AM's stderr", ctx: launch.LogAggregationContext{ExcludePattern: "stdout"},
			want: map[string]map[string]string{"127.0.1.1_8041": {"000001/stderr": ""}}},
		{name: "nothing picked writes no file", ctx: launch.LogAggregationContext{IncludePattern: "syslog"},
			want: map[string]map[string]string{}},
	} {
		for _, format := range []aggregated.Format{aggregated.FormatTFile, aggregated.FormatIndexed} {
			t.Run(tc.name+"/"+string(format), func(t *testing.T) {
				dirs := layOut(t)
				rec, _ := dirs.Record(endedApp)
				lac := tc.ctx
				rec.LogAggregation = &lac
				if err := dirs.SetRecord(endedApp, rec); err != nil {
					t.Fatal(err)
				}
				remote, layout := localRemote(t, format)
				a, err := NewAggregator(AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Format: format, Layout: layout, Store: LocalStore{}})
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Aggregate(context.Background(), endedApp); err != nil {
					t.Fatal(err)
				}
				if got := aggregatedFiles(t, remote, layout, format); !maps.EqualFunc(got, tc.want, maps.Equal) {
					t.Errorf("aggregated %v, want %v", got, tc.want)
				}
				for _, d := range dirs {
					if _, err := os.Stat(filepath.Join(d, endedApp)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s kept on the node: %v", d, err)
					}
				}
			})
		}
	}
}

func TestRollingUploadsRolledFilesOfARunningApplicationAndDeletesOnlyThem(t *testing.T) {
	for _, format := range []aggregated.Format{aggregated.FormatTFile, aggregated.FormatIndexed} {
		t.Run(string(format), func(t *testing.T) {
			dirs := layOut(t)
			rolled := filepath.Join(dirs[0], endedApp, "container_1795680442682_0007_01_000001", "syslog.1")
			if err := os.WriteFile(rolled, []byte("rolled\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rec, _ := dirs.Record(endedApp)
			rec.LogAggregation = &launch.LogAggregationContext{RolledLogsIncludePattern: `\.\d+$`}
			if err := dirs.SetRecord(endedApp, rec); err != nil {
				t.Fatal(err)
			}
			remote, layout := localRemote(t, format)
			now := time.UnixMilli(1_795_680_500_000)
			a, err := NewAggregator(AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Format: format, Layout: layout,
				Store: LocalStore{}, RollInterval: time.Hour, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Roll(context.Background(), endedApp); err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]string{"127.0.1.1_8041_1795680500000": {"000001/syslog.1": "rolled\n"}}
			if got := aggregatedFiles(t, remote, layout, format); !maps.EqualFunc(got, want, maps.Equal) {
				t.Fatalf("after the roll %v, want %v", got, want)
			}
			if _, err := os.Stat(rolled); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the rolled file stayed on the node after its upload: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dirs[0], endedApp, "container_1795680442682_0007_01_000001", "stdout")); err != nil {
				t.Errorf("a file the rolled pattern did not pick was touched: %v", err)
			}

			// A roll with nothing new writes nothing; the final aggregation
			// takes the rest into a file of its own time.
			if err := a.Roll(context.Background(), endedApp); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Hour)
			if err := a.Aggregate(context.Background(), endedApp); err != nil {
				t.Fatal(err)
			}
			want["127.0.1.1_8041_1795680500000"] = map[string]string{"000001/syslog.1": "rolled\n"}
			want["127.0.1.1_8041_1795684100000"] = laidOut
			if got := aggregatedFiles(t, remote, layout, format); !maps.EqualFunc(got, want, maps.Equal) {
				t.Errorf("after the end %v, want %v", got, want)
			}
		})
	}
}

func TestRollingLeavesApplicationsThatDidNotAskForIt(t *testing.T) {
	dirs := layOut(t)
	remote, layout := localRemote(t, aggregated.FormatTFile)
	a, err := NewAggregator(AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Layout: layout, Store: LocalStore{}, RollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Roll(context.Background(), endedApp); err != nil {
		t.Fatal(err)
	}
	if got := aggregatedFiles(t, remote, layout, aggregated.FormatTFile); len(got) != 0 {
		t.Errorf("rolled without a rolled include pattern: %v", got)
	}
}

func TestRunRollsOnItsInterval(t *testing.T) {
	dirs := layOut(t)
	rec, _ := dirs.Record(endedApp)
	rec.LogAggregation = &launch.LogAggregationContext{RolledLogsIncludePattern: "stdout"}
	if err := dirs.SetRecord(endedApp, rec); err != nil {
		t.Fatal(err)
	}
	remote, layout := localRemote(t, aggregated.FormatTFile)
	runAggregator(t, AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Layout: layout, Store: LocalStore{}, RollInterval: 10 * time.Millisecond})
	waitFor(t, "both stdout files to be rolled", func() bool {
		n := 0
		for _, logs := range aggregatedFiles(t, remote, layout, aggregated.FormatTFile) {
			n += len(logs)
		}
		return n == 2
	})
}

func TestRollingKeepsAtMostFilesPerAppOfTheNodeDeletingTheOldest(t *testing.T) {
	dirs := layOut(t)
	rec, _ := dirs.Record(endedApp)
	rec.LogAggregation = &launch.LogAggregationContext{RolledLogsIncludePattern: `^syslog`}
	if err := dirs.SetRecord(endedApp, rec); err != nil {
		t.Fatal(err)
	}
	_, layout := localRemote(t, aggregated.FormatTFile)
	appDir, _ := layout.AppDir("alice", endedApp)
	otherNode := filepath.Join(strings.TrimPrefix(appDir, "file://"), "127.0.1.2_8041_1795680000000")
	if err := os.MkdirAll(filepath.Dir(otherNode), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherNode, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_795_680_500_000)
	a, err := NewAggregator(AggregatorConfig{Dirs: dirs, NodeID: "127.0.1.1:8041", Layout: layout, Store: LocalStore{},
		RollInterval: time.Hour, FilesPerApp: 2, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	syslog := filepath.Join(dirs[0], endedApp, "container_1795680442682_0007_01_000001", "syslog")
	var names []string
	for i := range 4 {
		if err := os.WriteFile(syslog, []byte{byte('a' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := a.Roll(context.Background(), endedApp); err != nil {
			t.Fatal(err)
		}
		names = append(names, "127.0.1.1_8041_"+strconv.FormatInt(now.UnixMilli(), 10))
		now = now.Add(time.Hour)
	}
	ents, err := os.ReadDir(filepath.Dir(otherNode))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	// Two of this node's, the newest; another node's files are not its to
	// delete.
	want := []string{names[2], names[3], "127.0.1.2_8041_1795680000000"}
	if !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}
