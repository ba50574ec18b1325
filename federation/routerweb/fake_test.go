package routerweb

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/knitdev/knit/federation"
	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/federation/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorded is the folder of a real Hadoop 3.4.1 RM's REST answers.
const recorded = "../../../shared/testdata/hadoop-rest"

// recordedTimestamp is the cluster timestamp in the recorded answers.
const recordedTimestamp = "1795333013199"

func readRecorded(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(recorded, name))
	if err != nil {
		t.Fatalf("recorded answer: %v", err)
	}
	return b
}

// fakeRM is a sub-cluster RM's web services answering with the recorded
// answers, its application ids moved to its own cluster timestamp, and
// remembering what it was sent.
type fakeRM struct {
	id, ts string
	srv    *httptest.Server

	mu       sync.Mutex
	answers  map[string][]byte // by path and query
	statuses map[string]int
	got      []string // method path?query
	bodies   [][]byte
	types    []string // the bodies' Content-Type
}

func startRM(t *testing.T, id, ts string) *fakeRM {
	t.Helper()
	rm := &fakeRM{id: id, ts: ts, answers: map[string][]byte{}, statuses: map[string]int{}}
	for path, file := range map[string]string{
		"/ws/v1/cluster/info":                                         "cluster_info.json",
		"/ws/v1/cluster/metrics":                                      "cluster_metrics.json",
		"/ws/v1/cluster/scheduler":                                    "cluster_scheduler.json",
		"/ws/v1/cluster/apps":                                         "cluster_apps.json",
		"/ws/v1/cluster/nodes":                                        "cluster_nodes.json",
		"/ws/v1/cluster/nodes/localhost:8141":                         "cluster_nodes_localhost_8141.json",
		"/ws/v1/cluster/apps/application_" + ts + "_0002":             "cluster_apps_application_1795333013199_0002.json",
		"/ws/v1/cluster/apps/application_" + ts + "_0002/state":       "cluster_apps_application_1795333013199_0002_state.json",
		"/ws/v1/cluster/apps/application_" + ts + "_0002/appattempts": "cluster_apps_application_1795333013199_0002_appattempts.json",
		"/ws/v1/cluster/apps/new-application?user.name=root":          "POST_cluster_apps_new-application@user.name=root.json",
		"/ws/v1/cluster/apps?states=BOGUS":                            "cluster_apps@states=BOGUS.400.json",
	} {
		rm.answers[path] = rm.own(readRecorded(t, file))
	}
	rm.statuses["/ws/v1/cluster/apps?states=BOGUS"] = http.StatusBadRequest
	rm.srv = httptest.NewServer(http.HandlerFunc(rm.serve))
	t.Cleanup(rm.srv.Close)
	return rm
}

// own moves the recorded ids to this RM's cluster timestamp.
func (rm *fakeRM) own(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(recordedTimestamp), []byte(rm.ts))
}

func (rm *fakeRM) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}
	rm.mu.Lock()
	rm.got = append(rm.got, r.Method+" "+key)
	rm.bodies = append(rm.bodies, body)
	rm.types = append(rm.types, r.Header.Get("Content-Type"))
	answer, ok := rm.answers[key]
	status := rm.statuses[key]
	rm.mu.Unlock()
	if r.Method == http.MethodPost && key == "/ws/v1/cluster/apps?user.name=root" {
		w.Header().Set("Location", "http://"+r.Host+"/ws/v1/cluster/apps/elsewhere")
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"RemoteException":{"exception":"NotFoundException","message":"not recorded: `+key+`","javaClassName":"org.apache.hadoop.yarn.webapp.NotFoundException"}}`)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	if status != 0 {
		w.WriteHeader(status)
	}
	_, _ = w.Write(answer)
}

func (rm *fakeRM) set(path string, b []byte) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.answers[path] = b
}

func (rm *fakeRM) calls() []string {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return append([]string(nil), rm.got...)
}

func (rm *fakeRM) addr() string { return strings.TrimPrefix(rm.srv.URL, "http://") }

// fed is a federation under test: its store and the Router's web API.
type fed struct {
	store *store.Memory
	web   *httptest.Server
}

// federationOf is a store with the RMs registered and running, a Router
// placing applications by policy, and the web API in front of them.
func federationOf(t *testing.T, policy store.PolicyConfiguration, rms ...*fakeRM) fed {
	t.Helper()
	return federationCached(t, policy, 0, rms...)
}

// federationCached is federationOf with the Router reading the store
// through a cache of the given TTL.
func federationCached(t *testing.T, policy store.PolicyConfiguration, ttl time.Duration, rms ...*fakeRM) fed {
	t.Helper()
	ctx := context.Background()
	s := store.NewMemory(nil)
	for _, rm := range rms {
		if err := s.RegisterSubCluster(ctx, store.SubClusterInfo{ID: rm.id, AMRMServiceAddress: "amrm:8030", ClientRMServiceAddress: "client:8032",
			RMAdminServiceAddress: "admin:8033", RMWebServiceAddress: rm.addr(), State: store.StateRunning, LastStartTime: time.UnixMilli(1795333013199)}); err != nil {
			t.Fatal(err)
		}
		if err := s.SubClusterHeartbeat(ctx, rm.id, store.StateRunning, string(readRecorded(t, "cluster_metrics.json"))); err != nil {
			t.Fatal(err)
		}
	}
	cache := store.NewCache(s, ttl, nil)
	r, err := router.New(router.Config{Store: cache, DefaultPolicy: policy, SubmitRetry: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	w, err := New(Config{Store: cache, Placer: r})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)
	return fed{store: s, web: srv}
}

func uniform() store.PolicyConfiguration {
	return store.PolicyConfiguration{Queue: federation.DefaultPolicyQueue, Type: federation.UniformBroadcastPolicyManager}
}

// do sends a request to the web API, its body as JSON, and returns the
// status, headers and body.
func do(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	contentType := ""
	if body != "" {
		contentType = "application/json"
	}
	return doAs(t, method, url, contentType, body)
}

// doAs is do with the body sent as contentType.
func doAs(t *testing.T, method, url, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	return ask(t, method, url, contentType, "", body)
}

// ask is doAs with the answer asked for as accept (none when empty).
func ask(t *testing.T, method, url, contentType, accept, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// jsonOf decodes b into a generic value for comparisons.
func jsonOf(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return v
}
