package wordcount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knitdev/knit/daemonsets/auxservice"
	"github.com/knitdev/knit/daemonsets/shuffle"
	"github.com/knitdev/knit/examples/mrjob/mapred"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnid"
)

var quiet = slog.New(slog.DiscardHandler)

var testApp = yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}

const testUser = "mruser"

// node is one simulated node: its local dir and the real shuffle service
// serving it, with the job registered as the AM's service data registers it.
type node struct {
	localDir string
	appDir   string // $LOCAL_DIRS of the job's containers on the node
	svc      *shuffle.Service
	port     int
}

func startNode(t *testing.T, secret []byte) *node {
	t.Helper()
	n := &node{localDir: t.TempDir()}
	n.appDir = filepath.Join(n.localDir, "usercache", testUser, "appcache", testApp.String())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := shuffle.New(shuffle.Config{Listener: ln, LocalDirs: []string{n.localDir}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n.svc = svc
	if n.port, err = mapred.ParsePort(svc.Metadata()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shuffle service: %v", err)
		}
	})
	job := mapred.JobID{App: testApp}.String()
	app := auxservice.Application{User: testUser, ID: testApp, ServiceData: mapred.ServiceData(job, secret)}
	if err := svc.InitializeApplication(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	return n
}

// wordCount is what WordCount answers for texts.
func wordCount(texts []string) map[string]int {
	counts := map[string]int{}
	for _, s := range texts {
		for _, w := range strings.Fields(s) {
			counts[w]++
		}
	}
	return counts
}

// parseOutput reads "word\tcount" lines into counts, failing on a word
// seen twice.
func parseOutput(t *testing.T, out string, into map[string]int) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var n int
		w, c, ok := strings.Cut(line, "\t")
		if _, err := fmt.Sscan(c, &n); !ok || err != nil {
			t.Fatalf("output line %q", line)
		}
		if _, dup := into[w]; dup {
			t.Errorf("%q in two outputs", w)
		}
		into[w] = n
	}
}

func credentialsFile(t *testing.T, job string, secret []byte) string {
	t.Helper()
	c := &token.Credentials{}
	c.AddToken(mapred.JobTokenAlias, mapred.JobToken(job, []byte("job token password, not the secret")))
	c.AddSecret(mapred.ShuffleSecretAlias, secret)
	b, err := c.Marshal(token.FormatWritable)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runMaps runs one map per text, map i on nodes[i%len(nodes)], and returns
// the map hosts as the AM hands them to reducers.
func runMaps(t *testing.T, nodes []*node, texts []string, reduces int) []MapHost {
	t.Helper()
	job := mapred.JobID{App: testApp}
	hosts := make([]MapHost, len(nodes))
	for i, n := range nodes {
		hosts[i] = MapHost{Host: "127.0.0.1", Port: n.port}
	}
	for i, text := range texts {
		input := filepath.Join(t.TempDir(), "split")
		if err := os.WriteFile(input, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		attempt := mapred.AttemptID{Task: mapred.TaskID{Job: job, Type: mapred.Map, Index: i}}
		n := nodes[i%len(nodes)]
		var out bytes.Buffer
		dir, err := RunMap(MapOptions{Spec: TaskSpec{Job: job.String(), Attempt: attempt.String(), Reduces: reduces}, Input: input, LocalDirs: []string{n.appDir}, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if want := MapOutputDir(n.appDir, attempt.String()); dir != want {
			t.Errorf("map output in %s, want %s", dir, want)
		}
		hosts[i%len(nodes)].Maps = append(hosts[i%len(nodes)].Maps, attempt.String())
	}
	return hosts
}

var texts = []string{
	"the quick brown fox jumps over the lazy dog\nthe shuffle moves map output to reducers",
	"a map writes IFile segments and an index\tthe reducer fetches every partition",
	"knit runs yarn containers as pods and the shuffle serves the map output of every node",
	"fox dog fox dog the end",
}

func TestReducersFetchEveryMapsPartitionFromTheShuffleServiceAndCountEveryWord(t *testing.T) {
	secret := []byte("8bytes!!")
	nodes := []*node{startNode(t, secret), startNode(t, secret)}
	const reduces = 3
	hosts := runMaps(t, nodes, texts, reduces)
	job := mapred.JobID{App: testApp}
	tokens := credentialsFile(t, job.String(), secret)
	output := filepath.Join(t.TempDir(), "out")

	got := map[string]int{}
	for r := range reduces {
		attempt := mapred.AttemptID{Task: mapred.TaskID{Job: job, Type: mapred.Reduce, Index: r}}
		var stdout bytes.Buffer
		err := RunReduce(t.Context(), ReduceOptions{
			Spec:      TaskSpec{Job: job.String(), Attempt: attempt.String(), Hosts: hosts, Output: output},
			TokenFile: tokens, Stdout: &stdout, Logger: quiet,
		})
		if err != nil {
			t.Fatalf("reduce %d: %v", r, err)
		}
		part, err := os.ReadFile(filepath.Join(output, PartName(r)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(part, stdout.Bytes()) {
			t.Errorf("reduce %d: %s differs from its stdout", r, PartName(r))
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if !slices.IsSorted(lines) {
			t.Errorf("reduce %d output not sorted: %q", r, lines)
		}
		for _, l := range lines {
			w, _, _ := strings.Cut(l, "\t")
			if p := mapred.Partition(w, reduces); p != r {
				t.Errorf("%q counted by reducer %d, its partition is %d", w, r, p)
			}
		}
		parseOutput(t, stdout.String(), got)
	}
	want := wordCount(texts)
	if !maps.Equal(got, want) {
		t.Errorf("counts %v\nwant %v", got, want)
	}
}

func TestAReducerWithAForgedSecretGivesUpAsFetcherDoes(t *testing.T) {
	secret := []byte("8bytes!!")
	nodes := []*node{startNode(t, secret), startNode(t, secret)}
	hosts := runMaps(t, nodes, texts, 2)
	job := mapred.JobID{App: testApp}
	attempt := mapred.AttemptID{Task: mapred.TaskID{Job: job, Type: mapred.Reduce, Index: 0}}
	var logs bytes.Buffer
	err := RunReduce(t.Context(), ReduceOptions{
		// A penalty no test outlives: giving up at all shows it gave up
		// in the first round, before any host's penalty ran out.
		InitialPenalty: time.Hour,
		Spec:           TaskSpec{Job: job.String(), Attempt: attempt.String(), Hosts: hosts, ForgeShuffleToken: true},
		TokenFile:      credentialsFile(t, job.String(), secret), Stdout: &bytes.Buffer{},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if !errors.Is(err, ErrTooManyFetchFailures) {
		t.Fatalf("RunReduce = %v, want %v", err, ErrTooManyFetchFailures)
	}
	if !strings.Contains(err.Error(), "error in shuffle") {
		t.Errorf("error %q does not say the shuffle failed", err)
	}
	if !strings.Contains(logs.String(), "Got invalid response code 401") {
		t.Errorf("logs lack the shuffle's 401:\n%s", logs.String())
	}
}

func TestAReducerRetriesAHostAfterItsPenaltyAndSucceeds(t *testing.T) {
	secret := []byte("8bytes!!")
	good := startNode(t, secret)
	late := startNode(t, secret)
	// late's maps are not there yet: its first answer is a 500.
	hosts := runMaps(t, []*node{good}, texts[:3], 1)
	job := mapred.JobID{App: testApp}
	lateAttempt := mapred.AttemptID{Task: mapred.TaskID{Job: job, Type: mapred.Map, Index: 3}}
	hosts = []MapHost{{Host: "127.0.0.1", Port: good.port, Maps: hosts[0].Maps}, {Host: "127.0.0.1", Port: late.port, Maps: []string{lateAttempt.String()}}}
	go func() {
		time.Sleep(50 * time.Millisecond)
		input := filepath.Join(late.localDir, "split")
		_ = os.WriteFile(input, []byte(texts[3]), 0o644)
		_, _ = RunMap(MapOptions{Spec: TaskSpec{Job: job.String(), Attempt: lateAttempt.String(), Reduces: 1}, Input: input, LocalDirs: []string{late.appDir}, Stdout: &bytes.Buffer{}})
	}()
	attempt := mapred.AttemptID{Task: mapred.TaskID{Job: job, Type: mapred.Reduce, Index: 0}}
	var stdout bytes.Buffer
	err := RunReduce(t.Context(), ReduceOptions{
		Spec:      TaskSpec{Job: job.String(), Attempt: attempt.String(), Hosts: hosts},
		TokenFile: credentialsFile(t, job.String(), secret), Stdout: &stdout, Logger: quiet,
		InitialPenalty: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	parseOutput(t, stdout.String(), got)
	if want := wordCount(texts); !maps.Equal(got, want) {
		t.Errorf("counts %v\nwant %v", got, want)
	}
}
