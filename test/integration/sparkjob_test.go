package integration

import (
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/knitdev/knit/daemonsets/sparkshuffle"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/test/localcluster"
)

// sparkjobBinary builds the Spark-shaped example beside the other
// binaries, once.
var sparkjobBinary = sync.OnceValue(func() error { return buildExample("github.com/knitdev/knit/examples/sparkjob") })

// sparkjob runs the sparkjob client against the shared knit-rm; the
// shuffle service's port comes from the cluster's yarn-site.xml, as a
// Spark executor on YARN finds it.
func sparkjob(t *testing.T, args ...string) (string, yarnid.ApplicationID, error) {
	t.Helper()
	return runExample(t, sparkjobBinary, "sparkjob", args...)
}

// sparkFetch is a stage-2 executor's line for the blocks it fetched from
// one writer: its id and node, the blocks, the writer and the service's
// address.
var sparkFetch = regexp.MustCompile(`executor (\d+) on (\S+) fetched (\d+) blocks \(\d+ bytes\) of executor (\d+) from the shuffle service at (\S+):(\d+), all verified`)

func TestSparkShapedJobFetchesEveryBlockThroughTheShuffleServiceOfEachNode(t *testing.T) {
	dumpOnFailure(t)
	out, app, err := sparkjob(t, "-executors", "3", "-maps_per_executor", "2", "-partitions", "6", "-block_bytes", "65536")
	if err != nil {
		t.Fatalf("sparkjob: %v\n%s", err, out)
	}
	if !strings.Contains(out, "state: FINISHED") || !strings.Contains(out, "final status: SUCCEEDED") {
		t.Errorf("output lacks FINISHED/SUCCEEDED:\n%s", out)
	}
	port, err := clusterSparkShufflePort()
	if err != nil {
		t.Fatal(err)
	}
	// Stage 1: three executors wrote and registered on their nodes.
	writerNodes := map[string]int{}
	blocks, fetchers := 0, map[string]bool{}
	crossNode := map[string]bool{}
	for node, logs := range containerLogsByNode(app, "stdout") {
		for _, l := range logs {
			if strings.Contains(l, "and registered with the shuffle service at") {
				writerNodes[node]++
			}
			for _, m := range sparkFetch.FindAllStringSubmatch(l, -1) {
				fetchers[m[1]] = true
				n, _ := strconv.Atoi(m[3])
				blocks += n
				if m[6] != port {
					t.Errorf("executor %s fetched from port %s, the cluster's spark.shuffle.service.port is %s", m[1], m[6], port)
				}
				if m[5] != m[2] {
					crossNode[m[1]] = true
				}
			}
		}
	}
	if n := sum(writerNodes); n != 3 {
		t.Errorf("%d stage-1 executors registered, want 3: %v", n, writerNodes)
	}
	if len(writerNodes) < 2 {
		t.Errorf("stage-1 executors ran on %d node(s) %v, want several", len(writerNodes), writerNodes)
	}
	// Stage 2: three executors fetched every block: 6 maps × 6 partitions.
	if len(fetchers) != 3 || blocks != 36 {
		t.Errorf("%d stage-2 executors fetched %d blocks, want 3 fetching 36", len(fetchers), blocks)
	}
	if len(crossNode) != len(fetchers) {
		t.Errorf("only executors %v fetched from another node's shuffle service, want all of %v", crossNode, fetchers)
	}
}

func TestSparkShapedJobWithAWrongSecretIsRefused(t *testing.T) {
	dumpOnFailure(t)
	out, app, err := sparkjob(t, "-executors", "2", "-maps_per_executor", "1", "-partitions", "2", "-wrong_secret")
	if err == nil {
		t.Fatalf("sparkjob with a wrong secret succeeded:\n%s", out)
	}
	for _, want := range []string{"final status: FAILED", "Stage 2 failed: executor"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	registered, refused := 0, 0
	for _, logs := range containerLogsByNode(app, "stdout") {
		for _, l := range logs {
			registered += strings.Count(l, "and registered with the shuffle service at")
			if sparkFetch.MatchString(l) {
				t.Errorf("a fetch with a wrong secret was served:\n%s", l)
			}
		}
	}
	for _, logs := range containerLogsByNode(app, "stderr") {
		for _, l := range logs {
			if strings.Contains(l, "Error: fetching the blocks of executor") {
				refused++
				if !strings.Contains(l, "SASL") {
					t.Errorf("a fetch failed other than by SASL authentication:\n%s", l)
				}
			}
		}
	}
	if registered != 2 {
		t.Errorf("%d stage-1 executors registered with the right secret, want 2", registered)
	}
	if refused == 0 {
		t.Error("no stage-2 executor was refused")
	}
}

// clusterSparkShufflePort is spark.shuffle.service.port of the cluster's
// yarn-site.xml.
func clusterSparkShufflePort() (string, error) {
	conf := hadoopconf.New(hadoopconf.Options{})
	if err := conf.AddFile(filepath.Join(localcluster.HadoopConfDir(cluster.ControlPlane.Dir), "yarn-site.xml")); err != nil {
		return "", err
	}
	port, ok, err := conf.Lookup(sparkshuffle.PropPort)
	if err == nil && !ok {
		err = errors.New("the cluster's yarn-site.xml has no " + sparkshuffle.PropPort)
	}
	return port, err
}
