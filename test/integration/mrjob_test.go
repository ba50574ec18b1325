package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/test/localcluster"
)

// mrjobBinary builds the MapReduce-shaped example beside the other
// binaries, once.
var mrjobBinary = sync.OnceValue(func() error { return buildExample("github.com/knitdev/knit/examples/mrjob") })

// buildExample builds the example application pkg beside the other
// binaries.
func buildExample(pkg string) error {
	if err := knitBinaries(); err != nil {
		return err
	}
	out, err := exec.Command("go", "build", "-o", binDir+"/", pkg).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// mrInput writes n input files of generated words into a folder and
// returns it with the word counts WordCount must find.
func mrInput(t *testing.T, n int) (string, map[string]int) {
	t.Helper()
	vocabulary := strings.Fields("yarn knit pod node container shuffle map reduce partition index segment spill merge fetch token secret hash job task attempt kubernetes scheduler queue")
	dir := t.TempDir()
	want := map[string]int{}
	rng := rand.New(rand.NewPCG(14, 1))
	for i := range n {
		var b strings.Builder
		for line := range 40 {
			for w := range 12 {
				word := vocabulary[rng.IntN(len(vocabulary))]
				want[word]++
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(word)
			}
			if line%3 == 0 {
				b.WriteString("\t")
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, want
}

// mrjob runs the mrjob client against the shared knit-rm and returns its
// output and the application it submitted.
func mrjob(t *testing.T, args ...string) (string, yarnid.ApplicationID, error) {
	t.Helper()
	return runExample(t, mrjobBinary, "mrjob", args...)
}

// runExample builds an example application with build, runs its client
// binary name with args against the shared knit-rm, and returns its output
// and the application it submitted.
func runExample(t *testing.T, build func() error, name string, args ...string) (string, yarnid.ApplicationID, error) {
	t.Helper()
	knitRM(t)
	if err := build(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	cmd.Env = append(os.Environ(), "HADOOP_CONF_DIR="+localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "USER=dsuser")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	m := regexp.MustCompile(`Submitted application (application_\d+_\d+)`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Fatalf("%s submitted nothing: %v\n%s", name, err, buf.String())
	}
	app, perr := yarnid.ParseApplicationID(m[1])
	if perr != nil {
		t.Fatal(perr)
	}
	return buf.String(), app, err
}

// containerLogsByNode returns the named log of every container of app,
// keyed by node and container id.
func containerLogsByNode(app yarnid.ApplicationID, name string) map[string]map[string]string {
	logs := map[string]map[string]string{}
	for _, n := range cluster.Nodes {
		dir := filepath.Join(localcluster.NodeLogDir(cluster.ControlPlane.Dir, n.Name), app.String())
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name(), name)); err == nil {
				if logs[n.Name] == nil {
					logs[n.Name] = map[string]string{}
				}
				logs[n.Name][e.Name()] = string(b)
			}
		}
	}
	// As containerLogs: the node's copy first, then the aggregated files,
	// named by the node's address and NM port.
	for nodeFile, byContainer := range aggregatedLogs(cluster.ControlPlane.Dir, app, name) {
		for _, n := range cluster.Nodes {
			if !strings.HasPrefix(nodeFile, n.Address+"_") {
				continue
			}
			if logs[n.Name] == nil {
				logs[n.Name] = map[string]string{}
			}
			for id, log := range byContainer {
				logs[n.Name][id] = log
			}
		}
	}
	return logs
}

// wordCounts reads "word\tcount" lines.
func wordCounts(t *testing.T, out string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		w, c, ok := strings.Cut(line, "\t")
		n, err := strconv.Atoi(c)
		if !ok || err != nil {
			t.Fatalf("output line %q", line)
		}
		if _, dup := counts[w]; dup {
			t.Errorf("%q counted by two reducers", w)
		}
		counts[w] = n
	}
	return counts
}

func TestMapReduceJobWithReducersRunsToSucceededAcrossNodes(t *testing.T) {
	dumpOnFailure(t)
	input, want := mrInput(t, 6)
	output := filepath.Join(t.TempDir(), "out")
	out, app, err := mrjob(t, "-input", input, "-output", output, "-reduces", "3")
	if err != nil {
		t.Fatalf("mrjob: %v\n%s", err, out)
	}
	if !strings.Contains(out, "FINISHED") || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("output lacks FINISHED/SUCCEEDED:\n%s", out)
	}
	var parts strings.Builder
	for r := range 3 {
		b, err := os.ReadFile(filepath.Join(output, fmt.Sprintf("part-r-%05d", r)))
		if err != nil {
			t.Fatal(err)
		}
		parts.Write(b)
	}
	if got := wordCounts(t, parts.String()); !maps.Equal(got, want) {
		t.Errorf("word counts %v\nwant %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(output, "_SUCCESS")); err != nil {
		t.Errorf("no _SUCCESS after the job's commit: %v", err)
	}

	// The maps ran on several nodes, so reducers fetched from more than one
	// node's shuffle service.
	mapNodes := map[string]int{}
	reducers := 0
	for node, logs := range containerLogsByNode(app, "stdout") {
		for _, l := range logs {
			if strings.HasPrefix(l, "map attempt_") {
				mapNodes[node]++
			} else if strings.Contains(l, "\t") {
				reducers++
			}
		}
	}
	if n := sum(mapNodes); n != 6 {
		t.Errorf("%d map logs, want 6: %v", n, mapNodes)
	}
	if len(mapNodes) < 2 {
		t.Errorf("maps ran on %d node(s) %v, want several", len(mapNodes), mapNodes)
	}
	if reducers != 3 {
		t.Errorf("%d reducer logs with counts, want 3", reducers)
	}
}

func TestMapReduceJobWithAForgedShuffleTokenFails(t *testing.T) {
	dumpOnFailure(t)
	input, _ := mrInput(t, 3)
	output := filepath.Join(t.TempDir(), "out")
	out, app, err := mrjob(t, "-input", input, "-output", output, "-reduces", "1", "-max_attempts", "2", "-forge_shuffle_token")
	if err == nil {
		t.Fatalf("mrjob with a forged token succeeded:\n%s", out)
	}
	for _, want := range []string{"final status FAILED", "Task failed task_", "failedMaps:0 failedReduces:1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(output, "_SUCCESS")); err == nil {
		t.Error("a failed job committed its output")
	}
	// Each reduce attempt got 401s and gave up as Fetcher gives up.
	attempts := 0
	for _, logs := range containerLogsByNode(app, "stderr") {
		for _, l := range logs {
			if strings.Contains(l, "Exceeded MAX_FAILED_UNIQUE_FETCHES") {
				attempts++
				if !strings.Contains(l, "Got invalid response code 401") {
					t.Errorf("a reducer gave up without a 401:\n%s", l)
				}
			}
		}
	}
	if attempts != 2 {
		t.Errorf("%d reduce attempts gave up on the shuffle, want 2 (max attempts)", attempts)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
