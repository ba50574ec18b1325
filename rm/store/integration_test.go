package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knitdev/knit/federation/membership"
	fedstore "github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/test/tcpproxy"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func TestInstallIsIdempotentAndServesTheCRD(t *testing.T) {
	e := newEnv(t) // installs once
	s := e.store(t, storeOptions{})
	if err := s.Install(t.Context()); err != nil {
		t.Fatalf("second Install: %v", err)
	}
	dyn, err := dynamic.NewForConfig(e.cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crd, err := dyn.Resource(crdGVR()).Get(t.Context(), CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := crdEstablished(crd); !ok || err != nil {
		t.Errorf("crd established = %v, %v", ok, err)
	}
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	if !slices.Equal(short, []string{"yapp"}) {
		t.Errorf("short names %v", short)
	}
	// kubectl shows the printer columns.
	out, err := e.cp.Kubectl(t.Context(), "get", "yapp", "-n", e.ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get yapp: %v\n%s", err, out)
	}
	if _, err := s.Put(t.Context(), Record{ID: "application_1_0001", State: "RUNNING", User: "alice", Queue: "root.default"}); err != nil {
		t.Fatal(err)
	}
	out, err = e.cp.Kubectl(t.Context(), "get", "yapp", "-n", e.ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get yapp: %v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	if !slices.Equal(header, []string{"NAME", "STATE", "USER", "QUEUE", "AGE"}) {
		t.Errorf("kubectl columns %q", header)
	}
	if !strings.Contains(string(out), "application-1-0001") || !strings.Contains(string(out), "root.default") {
		t.Errorf("kubectl get yapp:\n%s", out)
	}
}

func TestPutCreatesUpdatesAndOverwritesStaleRecords(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, storeOptions{})
	ctx := t.Context()

	rec := Record{ID: "application_1700000000000_0001", State: "RUNNING", User: "bob@EXAMPLE.COM", Queue: "root.a", Data: []byte("v1")}
	created, err := s.Put(ctx, rec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.ResourceVersion == "" {
		t.Fatal("Put returned no resourceVersion")
	}
	wantRecords(t, s, created)

	finished := created
	finished.State, finished.FinishTime, finished.Data = StateFinished, time.Now().Truncate(time.Millisecond), []byte("v2")
	updated, err := s.Put(ctx, finished)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Error("update kept the resourceVersion")
	}
	wantRecords(t, s, updated)

	// A stale resourceVersion, then none at all: the RM is the only writer,
	// so both overwrite.
	stale := created
	stale.Data = []byte("v3")
	overwritten, err := s.Put(ctx, stale)
	if err != nil {
		t.Fatalf("put with a stale resourceVersion: %v", err)
	}
	wantRecords(t, s, overwritten)
	blind := overwritten
	blind.ResourceVersion, blind.Data = "", []byte("v4")
	if blind, err = s.Put(ctx, blind); err != nil {
		t.Fatalf("put without a resourceVersion: %v", err)
	}
	wantRecords(t, s, blind)

	obj, err := s.apps().Get(ctx, "application-1700000000000-0001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.GetLabels(); got[launch.LabelUser] != "bob_EXAMPLE.COM" || got[launch.LabelState] != "RUNNING" || got[launch.LabelQueue] != "root.a" {
		t.Errorf("labels %v", got)
	}
}

func TestPutRecreatesARecordDeletedMeanwhile(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, storeOptions{})
	rec, err := s.Put(t.Context(), Record{ID: "application_1_0002", State: "RUNNING"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	rec.State = "KILLED"
	if rec, err = s.Put(t.Context(), rec); err != nil {
		t.Fatalf("put after delete: %v", err)
	}
	wantRecords(t, s, rec)
}

func TestDeleteRemovesARecordAndToleratesAMissingOne(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, storeOptions{})
	ctx := t.Context()
	keep, err := s.Put(ctx, Record{ID: "application_1_0001", State: "RUNNING"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, Record{ID: "application_1_0002", State: StateFailed}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "application_1_0002"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantRecords(t, s, keep)
	if err := s.Delete(ctx, "application_1_0002"); err != nil {
		t.Errorf("deleting it again: %v", err)
	}
	if err := s.Delete(ctx, "application_1_9999"); err != nil {
		t.Errorf("deleting one never stored: %v", err)
	}
}

func TestListReadsEveryPage(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, storeOptions{})
	const n = 2*listPageSize + 1
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("application_1700000000000_%04d", i))
	}
	putAll(t, s, want)

	// A store whose transport counts its list requests.
	var lists atomic.Int64
	cfg := e.cp.RESTConfig()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/"+Resource) {
				lists.Add(1)
				if got := req.URL.Query().Get("limit"); got != strconv.Itoa(listPageSize) {
					t.Errorf("list request with limit %q", got)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	records, err := e.store(t, storeOptions{rest: cfg}).List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range records {
		got = append(got, r.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("listed %d records, want %d", len(got), len(want))
	}
	if lists.Load() != 3 {
		t.Errorf("%d list requests for %d records, want 3 pages", lists.Load(), n)
	}
}

func TestApplicationIDsNeverRepeatAcrossARestart(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	first := time.UnixMilli(1700000000000)
	s1 := e.store(t, storeOptions{now: func() time.Time { return first }})
	ids1 := NewIDs(s1, 10)
	var old []int32
	var ts1 int64
	for range 25 { // three blocks
		ts, seq, err := ids1.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ts1 = ts
		old = append(old, seq)
	}
	if ts1 != first.UnixMilli() {
		t.Errorf("cluster timestamp %d, want the first start's %d", ts1, first.UnixMilli())
	}
	if !slices.IsSorted(old) || old[0] != 1 || len(slices.Compact(slices.Clone(old))) != len(old) {
		t.Errorf("first RM's ids %v, want 1, 2, … increasing without repeats", old)
	}

	// A new RM on the same cluster: new clients, a later clock, the default
	// block size, and applications of the old one pruned meanwhile.
	s2 := e.store(t, storeOptions{now: func() time.Time { return first.Add(24 * time.Hour) }})
	ts2, err := s2.ClusterTimestamp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ts2 != ts1 {
		t.Errorf("cluster timestamp changed across restart: %d, then %d", ts1, ts2)
	}
	ids2 := NewIDs(s2, 0)
	for range 5 {
		ts, seq, err := ids2.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ts != ts1 || seq <= slices.Max(old) {
			t.Fatalf("after restart: id (%d, %d), want timestamp %d and a number above %d", ts, seq, ts1, slices.Max(old))
		}
	}
	block, err := s2.NextApplicationIDs(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if block.First != 30+DefaultIDBlockSize+1 || block.Last != block.First+2 {
		t.Errorf("next block %+v, want it to follow the 30 + %d reserved", block, DefaultIDBlockSize)
	}
}

func TestEpochRisesByOneAtEveryStartAndKeepsTheIDReservation(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	s1 := e.store(t, storeOptions{})
	block, err := s1.NextApplicationIDs(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 3; want++ {
		s := e.store(t, storeOptions{}) // a restarted RM
		got, err := s.NextEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("start %d: epoch %d, want %d", want, got, want)
		}
	}
	next, err := s1.NextApplicationIDs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if next.First != block.Last+1 || next.ClusterTimestamp != block.ClusterTimestamp {
		t.Errorf("reservation after epochs %+v, want it to follow %+v", next, block)
	}
}

func TestIDsAreUniqueUnderConcurrentUse(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, storeOptions{})
	ids := NewIDs(s, 7)
	const workers, each = 8, 40
	seqs := make([][]int32, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				_, seq, err := ids.Next(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				seqs[w] = append(seqs[w], seq)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(seqs...)
	slices.Sort(all)
	if len(slices.Compact(slices.Clone(all))) != workers*each {
		t.Fatalf("%d ids handed out, %d distinct", len(all), len(slices.Compact(slices.Clone(all))))
	}
	cm, err := e.admin.CoreV1().ConfigMaps(e.ns).Get(t.Context(), ClusterConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, reserved, err := parseCluster(cm)
	if err != nil {
		t.Fatal(err)
	}
	if int64(all[len(all)-1]) > reserved {
		t.Errorf("id %d handed out beyond the stored reservation %d", all[len(all)-1], reserved)
	}
}

func TestTokenKeysRoundTripAcrossStores(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	keys := e.store(t, storeOptions{}).TokenKeys()
	if blob, err := keys.Load(ctx); err != nil || blob != nil {
		t.Fatalf("Load before any Save = %q, %v; want nil, nil", blob, err)
	}
	v1 := []byte("keys v1 \x00\xff")
	if err := keys.Save(ctx, v1); err != nil {
		t.Fatal(err)
	}
	v1[0] = 'X' // the caller's slice is not the stored one
	if blob, err := keys.Load(ctx); err != nil || string(blob) != "keys v1 \x00\xff" {
		t.Fatalf("Load = %q, %v", blob, err)
	}
	v2 := bytes.Repeat([]byte("k2"), 4096)
	if err := keys.Save(ctx, v2); err != nil {
		t.Fatalf("second Save: %v", err)
	}
	restarted := e.store(t, storeOptions{}).TokenKeys()
	if blob, err := restarted.Load(ctx); err != nil || !bytes.Equal(blob, v2) {
		t.Fatalf("Load after restart = %d bytes, %v; want the second blob", len(blob), err)
	}
}

// TestWritesDuringAnAPIServerOutageCompleteAfterIt cuts the store off from
// the API server, issues writes, checks they are held back and retried,
// then restores the connection: every write lands, none is lost.
func TestWritesDuringAnAPIServerOutageCompleteAfterIt(t *testing.T) {
	e := newEnv(t)
	server, err := url.Parse(e.cp.Server)
	if err != nil {
		t.Fatal(err)
	}
	// A TCP proxy in front of the API server, taken down and brought
	// back, plays an outage without stopping the shared control plane.
	proxy, err := tcpproxy.Start(server.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg := e.cp.RESTConfig()
	cfg.Host = "https://" + proxy.Addr()
	var failures atomic.Int64
	s := e.store(t, storeOptions{rest: cfg, failures: &failures})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Through the proxy, with a kept-alive connection the outage must cut.
	before, err := s.Put(ctx, Record{ID: "application_1_0001", State: "RUNNING"})
	if err != nil {
		t.Fatal(err)
	}

	proxy.Down()
	type result struct {
		what string
		err  error
	}
	results := make(chan result, 4)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // no write may outlive the test's log
	for what, write := range map[string]func() error{
		"create": func() error {
			_, err := s.Put(ctx, Record{ID: "application_1_0002", State: "ACCEPTED", Data: []byte("during")})
			return err
		},
		"update": func() error {
			before.State = StateFinished
			_, err := s.Put(ctx, before)
			return err
		},
		"reserve ids": func() error { _, err := s.NextApplicationIDs(ctx, 5); return err },
		"save keys":   func() error { return s.TokenKeys().Save(ctx, []byte("during")) },
	} {
		wg.Go(func() { results <- result{what, write()} })
	}

	// About ten failed attempts each: the backoff reaches its cap, so the
	// outage outlasts any retry client-go might make on its own.
	eventually(t, time.Minute, "writes failing against the down API server", func() bool { return failures.Load() >= 40 })
	select {
	case r := <-results:
		t.Fatalf("%s returned during the outage: %v", r.what, r.err)
	default:
	}

	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		select {
		case r := <-results:
			if r.err != nil {
				t.Errorf("%s: %v", r.what, r.err)
			}
		case <-ctx.Done():
			t.Fatal("writes did not complete after the API server came back")
		}
	}

	// Read back directly, not through the proxy.
	direct := e.store(t, storeOptions{})
	records, err := direct.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, r := range records {
		states[r.ID] = r.State
	}
	if states["application_1_0001"] != StateFinished || states["application_1_0002"] != "ACCEPTED" {
		t.Errorf("stored after the outage: %v", states)
	}
	if blob, err := direct.TokenKeys().Load(t.Context()); err != nil || string(blob) != "during" {
		t.Errorf("keys after the outage: %q, %v", blob, err)
	}
	if block, err := direct.NextApplicationIDs(t.Context(), 1); err != nil || block.First != 6 {
		t.Errorf("block after the outage: %+v, %v; want the 5 reserved during it kept", block, err)
	}
}

func TestForbiddenWritesFailAtOnce(t *testing.T) {
	e := newEnv(t)
	cfg := e.cp.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	var failures atomic.Int64
	s := e.store(t, storeOptions{rest: cfg, failures: &failures})
	_, err := s.Put(t.Context(), Record{ID: "application_1_0001", State: "RUNNING"})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Put as a user without rights: %v, want forbidden", err)
	}
	if err := s.TokenKeys().Save(t.Context(), []byte("x")); !apierrors.IsForbidden(err) {
		t.Fatalf("Save as a user without rights: %v, want forbidden", err)
	}
	if n := failures.Load(); n != 0 {
		t.Errorf("%d retries of a forbidden write, want none", n)
	}
}

func TestWritesIntoAMissingNamespaceFailAtOnce(t *testing.T) {
	e := newEnv(t)
	var failures atomic.Int64
	s := e.store(t, storeOptions{failures: &failures})
	s.ns = "no-such-namespace"
	_, err := s.Put(t.Context(), Record{ID: "application_1_0001", State: "RUNNING"})
	if !apierrors.IsNotFound(err) || failures.Load() != 0 {
		t.Fatalf("Put = %v after %d retries; want not found, no retry", err, failures.Load())
	}
}

// wantRecords checks that List returns exactly want (in any order).
func wantRecords(t *testing.T, s *Store, want ...Record) {
	t.Helper()
	got, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(want, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	if len(got) != len(want) {
		t.Fatalf("List = %d records, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.State != w.State || g.User != w.User || g.Queue != w.Queue ||
			!g.FinishTime.Equal(w.FinishTime) || !bytes.Equal(g.Data, w.Data) || g.ResourceVersion != w.ResourceVersion {
			t.Errorf("List[%d]:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// putAll stores a RUNNING record for each id, a few at a time.
func putAll(t *testing.T, s *Store, ids []string) {
	t.Helper()
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range work {
				if _, err := s.Put(t.Context(), Record{ID: id, State: "RUNNING", Data: []byte(id)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Two federated RMs that fix their cluster timestamps in the same
// millisecond get different ones, claimed in the federation store before
// any id is handed out; an RM whose fixed timestamp another sub-cluster
// holds hands out none.
func TestFederatedRMsFixingTheirTimestampsInOneMillisecondGiveDifferentIDs(t *testing.T) {
	e1, e2, e3 := newEnv(t), newEnv(t), newEnv(t)
	ctx := t.Context()
	fed := fedstore.NewMemory(nil)
	now := time.UnixMilli(1700000000000)
	member := func(e *testEnv, id string) *IDs {
		claims, err := membership.NewTimestamps(fed, id)
		if err != nil {
			t.Fatal(err)
		}
		return NewIDs(e.store(t, storeOptions{now: func() time.Time { return now }, timestamps: claims}), 10)
	}
	ts1, _, err := member(e1, "sc1").Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts2, _, err := member(e2, "sc2").Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ts1 != now.UnixMilli() || ts2 == ts1 {
		t.Errorf("cluster timestamps %d and %d, fixed at %d; want the first there and the second another", ts1, ts2, now.UnixMilli())
	}
	for id, ts := range map[string]int64{"sc1": ts1, "sc2": ts2} {
		if holder, err := fed.ClaimClusterTimestamp(ctx, ts, "other"); err != nil || holder != id {
			t.Errorf("timestamp %d held by %q, %v; want %s", ts, holder, err, id)
		}
	}

	// sc3's RM fixed sc1's timestamp before the federation guarded them.
	plain := NewIDs(e3.store(t, storeOptions{now: func() time.Time { return now }}), 10)
	if ts, _, err := plain.Next(ctx); err != nil || ts != ts1 {
		t.Fatalf("unguarded RM: timestamp %d, %v", ts, err)
	}
	if _, _, err := member(e3, "sc3").Next(ctx); !errors.Is(err, ErrTimestampTaken) {
		t.Errorf("an id under sc1's timestamp for sc3: %v, want ErrTimestampTaken", err)
	}
}
