package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// clock is a settable clock for the stores' heartbeats.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_700_000_000_000)} }

// implementations are the stores every contract test runs against: the
// Kube one on a namespace of the shared control plane (skipped under
// -short), and Memory.
func implementations(t *testing.T) map[string]func(t *testing.T, now func() time.Time) StateStore {
	return map[string]func(t *testing.T, now func() time.Time) StateStore{
		"memory": func(_ *testing.T, now func() time.Time) StateStore { return NewMemory(now) },
		"kube": func(t *testing.T, now func() time.Time) StateStore {
			k, err := NewKube(KubeConfig{Client: testClient(t), Namespace: testNamespace(t), Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return k
		},
	}
}

func testClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	if testCluster == nil {
		t.Skip("needs a control plane; not started under -short")
	}
	c, err := testCluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testNamespace(t *testing.T) string {
	t.Helper()
	ns, err := testClient(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "federation-test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func subCluster(id string) SubClusterInfo {
	return SubClusterInfo{
		ID:                     id,
		AMRMServiceAddress:     id + ":8030",
		ClientRMServiceAddress: id + ":8032",
		RMAdminServiceAddress:  id + ":8033",
		RMWebServiceAddress:    id + ":8088",
		State:                  StateNew,
		LastStartTime:          time.UnixMilli(1_600_000_000_000),
	}
}

func TestMembershipFollowsRegistrationHeartbeatsAndDeregistration(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			s := newStore(t, clk.now)
			ctx := t.Context()
			if err := s.RegisterSubCluster(ctx, subCluster("sc1")); err != nil {
				t.Fatal(err)
			}
			if err := s.RegisterSubCluster(ctx, subCluster("sc2")); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetSubCluster(ctx, "sc1")
			if err != nil {
				t.Fatal(err)
			}
			want := subCluster("sc1")
			want.LastHeartBeat = clk.now()
			if !sameInfo(got, want) {
				t.Errorf("registered\n got %+v\nwant %+v", got, want)
			}
			// A new sub-cluster is not active until it heartbeats RUNNING.
			if active, _ := s.GetSubClusters(ctx, true); len(active) != 0 {
				t.Errorf("active before any heartbeat: %v", ids(active))
			}
			clk.advance(time.Minute)
			if err := s.SubClusterHeartbeat(ctx, "sc1", StateRunning, `{"clusterMetrics":{"appsSubmitted":1}}`); err != nil {
				t.Fatal(err)
			}
			got, _ = s.GetSubCluster(ctx, "sc1")
			if got.State != StateRunning || got.Capability != `{"clusterMetrics":{"appsSubmitted":1}}` || !got.LastHeartBeat.Equal(clk.now()) {
				t.Errorf("after heartbeat: %+v", got)
			}
			active, err := s.GetSubClusters(ctx, true)
			if err != nil || !slices.Equal(ids(active), []string{"sc1"}) {
				t.Errorf("active = %v, %v; want [sc1]", ids(active), err)
			}
			all, err := s.GetSubClusters(ctx, false)
			if err != nil || !slices.Equal(ids(all), []string{"sc1", "sc2"}) {
				t.Errorf("all = %v, %v; want [sc1 sc2]", ids(all), err)
			}
			if err := s.DeregisterSubCluster(ctx, "sc1", StateUnregistered); err != nil {
				t.Fatal(err)
			}
			got, _ = s.GetSubCluster(ctx, "sc1")
			if got.State != StateUnregistered || got.Capability == "" {
				t.Errorf("deregistration changed more than the state: %+v", got)
			}
			// A re-registration replaces the sub-cluster.
			again := subCluster("sc1")
			again.ClientRMServiceAddress = "elsewhere:8032"
			if err := s.RegisterSubCluster(ctx, again); err != nil {
				t.Fatal(err)
			}
			got, _ = s.GetSubCluster(ctx, "sc1")
			if got.State != StateNew || got.ClientRMServiceAddress != "elsewhere:8032" || got.Capability != "" {
				t.Errorf("re-registered: %+v", got)
			}
		})
	}
}

func TestMembershipRefusesUnknownSubClustersAndBadRecords(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			ctx := t.Context()
			noAddress := subCluster("sc1")
			noAddress.AMRMServiceAddress = ""
			tests := []struct {
				name     string
				call     func() error
				notFound bool
			}{
				{"heartbeat of an unregistered sub-cluster", func() error { return s.SubClusterHeartbeat(ctx, "nope", StateRunning, "") }, true},
				{"deregistration of an unregistered sub-cluster", func() error { return s.DeregisterSubCluster(ctx, "nope", StateLost) }, true},
				{"lookup of an unregistered sub-cluster", func() error { _, err := s.GetSubCluster(ctx, "nope"); return err }, true},
				{"registration without an address", func() error { return s.RegisterSubCluster(ctx, noAddress) }, false},
				{"registration without an id", func() error { return s.RegisterSubCluster(ctx, subCluster("")) }, false},
				{"heartbeat with no state", func() error { return s.SubClusterHeartbeat(ctx, "nope", 0, "") }, false},
			}
			for _, tt := range tests {
				err := tt.call()
				if err == nil || errors.Is(err, ErrNotFound) != tt.notFound {
					t.Errorf("%s: err %v, want an error (not found: %v)", tt.name, err, tt.notFound)
				}
			}
		})
	}
}

func TestAnApplicationKeepsItsFirstHomeUntilUpdated(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			s := newStore(t, clk.now)
			ctx := t.Context()
			const app = "application_1700000000000_0001"
			if _, err := s.GetApplicationHomeSubCluster(ctx, app); !errors.Is(err, ErrNotFound) {
				t.Errorf("home before any: %v, want not found", err)
			}
			home, err := s.AddApplicationHomeSubCluster(ctx, ApplicationHome{Application: app, Home: "sc1"})
			if err != nil || home != "sc1" {
				t.Fatalf("first add = %q, %v", home, err)
			}
			home, err = s.AddApplicationHomeSubCluster(ctx, ApplicationHome{Application: app, Home: "sc2"})
			if err != nil || home != "sc1" {
				t.Errorf("second add = %q, %v; want the first home sc1", home, err)
			}
			if err := s.UpdateApplicationHomeSubCluster(ctx, ApplicationHome{Application: app, Home: "sc2"}); err != nil {
				t.Fatal(err)
			}
			if home, err := s.GetApplicationHomeSubCluster(ctx, app); err != nil || home != "sc2" {
				t.Errorf("after update = %q, %v", home, err)
			}
			if _, err := s.AddApplicationHomeSubCluster(ctx, ApplicationHome{Application: "application_1700000000000_0002", Home: "sc1"}); err != nil {
				t.Fatal(err)
			}
			for _, tt := range []struct {
				home string
				want []string
			}{
				{"", []string{app + "@sc2", "application_1700000000000_0002@sc1"}},
				{"sc1", []string{"application_1700000000000_0002@sc1"}},
				{"sc3", nil},
			} {
				list, err := s.GetApplicationsHomeSubCluster(ctx, tt.home)
				var got []string
				for _, h := range list {
					got = append(got, h.Application+"@"+h.Home)
					// The store's clock stamps the first record of a home.
					if !h.CreateTime.Equal(clk.now()) {
						t.Errorf("%s created at %v, want %v", h.Application, h.CreateTime, clk.now())
					}
				}
				if err != nil || !slices.Equal(got, tt.want) {
					t.Errorf("homes in %q = %v, %v; want %v", tt.home, got, err, tt.want)
				}
			}
			if err := s.DeleteApplicationHomeSubCluster(ctx, app); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteApplicationHomeSubCluster(ctx, app); !errors.Is(err, ErrNotFound) {
				t.Errorf("second delete: %v, want not found", err)
			}
			if err := s.UpdateApplicationHomeSubCluster(ctx, ApplicationHome{Application: app, Home: "sc1"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("update of a deleted home: %v, want not found", err)
			}
		})
	}
}

func TestAReservationKeepsItsFirstHomeUntilUpdatedOrDeleted(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			ctx := t.Context()
			const r = "reservation_1700000000000_0001"
			if _, err := s.GetReservationHomeSubCluster(ctx, r); !errors.Is(err, ErrNotFound) {
				t.Errorf("home before any: %v, want not found", err)
			}
			if err := s.UpdateReservationHomeSubCluster(ctx, ReservationHome{Reservation: r, Home: "sc1"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("update before any: %v, want not found", err)
			}
			for _, tt := range []struct{ add, want string }{{"sc1", "sc1"}, {"sc2", "sc1"}} {
				if home, err := s.AddReservationHomeSubCluster(ctx, ReservationHome{Reservation: r, Home: tt.add}); err != nil || home != tt.want {
					t.Errorf("add %s = %q, %v; want %s", tt.add, home, err, tt.want)
				}
			}
			// An application of the same number is another record.
			if _, err := s.GetApplicationHomeSubCluster(ctx, r); !errors.Is(err, ErrNotFound) {
				t.Errorf("the reservation's home read as an application's: %v", err)
			}
			if err := s.UpdateReservationHomeSubCluster(ctx, ReservationHome{Reservation: r, Home: "sc2"}); err != nil {
				t.Fatal(err)
			}
			if home, err := s.GetReservationHomeSubCluster(ctx, r); err != nil || home != "sc2" {
				t.Errorf("after update = %q, %v", home, err)
			}
			if err := s.DeleteReservationHomeSubCluster(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteReservationHomeSubCluster(ctx, r); !errors.Is(err, ErrNotFound) {
				t.Errorf("second delete: %v, want not found", err)
			}
		})
	}
}

// Routers racing to record one application's home all learn the same one.
func TestConcurrentAddsOfAHomeAgreeOnTheFirst(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			const app = "application_1700000000000_0042"
			homes := make([]string, 8)
			errs := make([]error, len(homes))
			var wg sync.WaitGroup
			for i := range homes {
				wg.Go(func() {
					homes[i], errs[i] = s.AddApplicationHomeSubCluster(t.Context(), ApplicationHome{Application: app, Home: fmt.Sprintf("sc%d", i)})
				})
			}
			wg.Wait()
			stored, err := s.GetApplicationHomeSubCluster(t.Context(), app)
			if err != nil {
				t.Fatal(err)
			}
			for i := range homes {
				if errs[i] != nil || homes[i] != stored {
					t.Errorf("router %d: home %q, %v; the store holds %q", i, homes[i], errs[i], stored)
				}
			}
		})
	}
}

func TestPoliciesAreKeptPerQueue(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			ctx := t.Context()
			if _, err := s.GetPolicyConfiguration(ctx, "root.a"); !errors.Is(err, ErrNotFound) {
				t.Errorf("policy before any: %v, want not found", err)
			}
			a := PolicyConfiguration{Queue: "root.a", Type: "org.example.A", Params: []byte(`{"x":1}`)}
			star := PolicyConfiguration{Queue: "*", Type: "org.example.Default"}
			for _, p := range []PolicyConfiguration{a, star, {Queue: "root.a", Type: "org.example.A2", Params: []byte{0, 1}}} {
				if err := s.SetPolicyConfiguration(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.GetPolicyConfiguration(ctx, "root.a")
			if err != nil || got.Type != "org.example.A2" || string(got.Params) != "\x00\x01" {
				t.Errorf("root.a = %+v, %v", got, err)
			}
			all, err := s.GetPoliciesConfigurations(ctx)
			if err != nil || len(all) != 2 || all[0].Queue != "*" || all[1].Queue != "root.a" {
				t.Errorf("all = %+v, %v", all, err)
			}
			if err := s.SetPolicyConfiguration(ctx, PolicyConfiguration{Queue: "root.b"}); err == nil {
				t.Error("a policy without a type was stored")
			}
			if err := s.DeletePoliciesConfigurations(ctx, []string{"root.a", "root.none"}); err != nil {
				t.Fatal(err)
			}
			if all, err := s.GetPoliciesConfigurations(ctx); err != nil || len(all) != 1 || all[0].Queue != "*" {
				t.Errorf("after deleting root.a: %+v, %v", all, err)
			}
		})
	}
}

func TestRouterKeysAreReplacedOnlyUnderTheVersionRead(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			ctx := t.Context()
			data, v0, err := s.GetRouterKeys(ctx)
			if err != nil || len(data) != 0 || v0 != "" {
				t.Fatalf("keys before any: %q, version %q, %v", data, v0, err)
			}
			v1, err := s.PutRouterKeys(ctx, []byte("first"), v0)
			if err != nil || v1 == "" {
				t.Fatalf("first write: version %q, %v", v1, err)
			}
			// A second Router that also read nothing stored comes second.
			if _, err := s.PutRouterKeys(ctx, []byte("other first"), v0); !errors.Is(err, ErrConflict) {
				t.Errorf("a create over stored keys: %v, want a conflict", err)
			}
			v2, err := s.PutRouterKeys(ctx, []byte("second"), v1)
			if err != nil || v2 == v1 {
				t.Fatalf("write over the version read: version %q, %v", v2, err)
			}
			if _, err := s.PutRouterKeys(ctx, []byte("stale"), v1); !errors.Is(err, ErrConflict) {
				t.Errorf("a write over a replaced version: %v, want a conflict", err)
			}
			if data, v, err := s.GetRouterKeys(ctx); err != nil || string(data) != "second" || v != v2 {
				t.Errorf("keys = %q, version %q, %v; want second, %q", data, v, err, v2)
			}
			if _, err := s.PutRouterKeys(ctx, make([]byte, MaxRouterKeys+1), v2); err == nil || errors.Is(err, ErrConflict) {
				t.Errorf("keys over the bound: %v, want refused", err)
			}
		})
	}
}

func ids(infos []SubClusterInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.ID)
	}
	return out
}

// sameInfo compares infos with times to the millisecond, as stored.
func sameInfo(a, b SubClusterInfo) bool {
	a.LastHeartBeat, b.LastHeartBeat = a.LastHeartBeat.Truncate(time.Millisecond), b.LastHeartBeat.Truncate(time.Millisecond)
	return a.LastHeartBeat.Equal(b.LastHeartBeat) && a.LastStartTime.Equal(b.LastStartTime) &&
		a.ID == b.ID && a.AMRMServiceAddress == b.AMRMServiceAddress && a.ClientRMServiceAddress == b.ClientRMServiceAddress &&
		a.RMAdminServiceAddress == b.RMAdminServiceAddress && a.RMWebServiceAddress == b.RMWebServiceAddress &&
		a.State == b.State && a.Capability == b.Capability
}

func TestObjectNamesAreValidAndDistinct(t *testing.T) {
	keys := []string{"sc1", "SC1", "sub cluster/1", "*", "root.a", "root_a", "application_1700000000000_0001", string(make([]byte, 300))}
	seen := map[string]string{}
	for _, k := range keys {
		n := objectName(KindPolicy, k)
		if len(n) > 253 || !validName(n) {
			t.Errorf("name of %q: %q is not a valid object name", k, n)
		}
		if errs := validation.IsValidLabelValue(labelValue(k)); len(errs) != 0 {
			t.Errorf("label value of %q: %q: %v", k, labelValue(k), errs)
		}
		if other, ok := seen[n]; ok {
			t.Errorf("%q and %q share the name %q", k, other, n)
		}
		seen[n] = k
	}
}

func validName(n string) bool {
	for i, r := range n {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || (r == '-' && i > 0 && i < len(n)-1)
		if !ok {
			return false
		}
	}
	return n != ""
}

func TestParseCapabilityReadsTheHeartbeatsClusterMetrics(t *testing.T) {
	tests := []struct {
		name       string
		capability string
		want       ClusterMetrics
		wantErr    bool
	}{
		{"knit-rm's heartbeat", `{"clusterMetrics":{"appsSubmitted":3,"appsPending":2,"availableMB":4096,"totalMB":8192}}`, ClusterMetrics{AvailableMB: 4096, AppsPending: 2}, false},
		{"before the first heartbeat", ``, ClusterMetrics{}, true},
		{"without clusterMetrics", `{"other":{}}`, ClusterMetrics{}, true},
		{"without availableMB", `{"clusterMetrics":{"appsPending":2}}`, ClusterMetrics{}, true},
		{"without appsPending", `{"clusterMetrics":{"availableMB":1}}`, ClusterMetrics{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCapability(tt.capability)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("ParseCapability = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestAClusterTimestampIsHeldByTheFirstSubClusterToClaimIt(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			ctx := t.Context()
			const ts = 1_700_000_000_000
			for _, c := range []struct {
				ts         int64
				id, holder string
			}{
				{ts, "sc1", "sc1"},
				{ts, "sc1", "sc1"}, // claimed again by its holder: still its
				{ts, "sc2", "sc1"}, // taken
				{ts + 1, "sc2", "sc2"},
				{ts + 1, "sc1", "sc2"},
			} {
				if holder, err := s.ClaimClusterTimestamp(ctx, c.ts, c.id); err != nil || holder != c.holder {
					t.Errorf("%s claims %d: holder %q, %v; want %q", c.id, c.ts, holder, err, c.holder)
				}
			}
			for _, bad := range []struct {
				ts int64
				id string
			}{{0, "sc1"}, {ts, ""}} {
				if _, err := s.ClaimClusterTimestamp(ctx, bad.ts, bad.id); err == nil {
					t.Errorf("claim of %d by %q: no error", bad.ts, bad.id)
				}
			}
		})
	}
}

func TestConcurrentClaimsOfAClusterTimestampAgreeOnOneHolder(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			const n = 8
			holders := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					holders[i], errs[i] = s.ClaimClusterTimestamp(t.Context(), 1_700_000_000_000, fmt.Sprintf("sc%d", i))
				})
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil || holders[i] != holders[0] {
					t.Errorf("claim %d: holder %q, %v; claim 0's holder %q", i, holders[i], errs[i], holders[0])
				}
			}
		})
	}
}

func TestRouterTokensAreKeptOneRecordEachAndWrittenOnlyUnderTheVersionRead(t *testing.T) {
	for name, newStore := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, newClock().now)
			ctx := t.Context()
			if got, err := s.GetRouterTokens(ctx); err != nil || len(got) != 0 {
				t.Fatalf("tokens before any: %v, %v", got, err)
			}
			v1, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 1, Data: []byte("one")})
			if err != nil || v1 == "" {
				t.Fatalf("create token 1: version %q, %v", v1, err)
			}
			v2, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 2, Data: []byte("two")})
			if err != nil {
				t.Fatal(err)
			}
			// Another Router that also read no token 1 comes second.
			if _, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 1, Data: []byte("other one")}); !errors.Is(err, ErrConflict) {
				t.Errorf("a create over a stored token: %v, want a conflict", err)
			}
			v1b, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 1, Data: []byte("one renewed"), Version: v1})
			if err != nil || v1b == v1 {
				t.Fatalf("update of token 1 over the version read: %q, %v", v1b, err)
			}
			for _, stale := range []struct {
				name string
				call func() error
			}{
				{"an update over a replaced version", func() error {
					_, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 1, Data: []byte("stale"), Version: v1})
					return err
				}},
				{"a deletion over a replaced version", func() error { return s.DeleteRouterToken(ctx, 1, v1) }},
				{"an update of a token never stored", func() error {
					_, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 3, Data: []byte("three"), Version: v1})
					return err
				}},
			} {
				if err := stale.call(); !errors.Is(err, ErrConflict) {
					t.Errorf("%s: %v, want a conflict", stale.name, err)
				}
			}
			got, err := s.GetRouterTokens(ctx)
			if err != nil || len(got) != 2 || got[0].SequenceNumber != 1 || string(got[0].Data) != "one renewed" || got[0].Version != v1b ||
				got[1].SequenceNumber != 2 || string(got[1].Data) != "two" || got[1].Version != v2 {
				t.Fatalf("tokens = %+v, %v", got, err)
			}
			if err := s.DeleteRouterToken(ctx, 1, v1b); err != nil {
				t.Fatal(err)
			}
			// A retried delete whose first answer was lost finds the
			// token gone, as it wanted.
			if err := s.DeleteRouterToken(ctx, 1, v1b); err != nil {
				t.Errorf("a deletion of a deleted token: %v, want none", err)
			}
			if got, err := s.GetRouterTokens(ctx); err != nil || len(got) != 1 || got[0].SequenceNumber != 2 {
				t.Errorf("tokens after deleting 1: %+v, %v", got, err)
			}
			if _, err := s.PutRouterToken(ctx, RouterToken{SequenceNumber: 4, Data: make([]byte, MaxRouterToken+1)}); err == nil || errors.Is(err, ErrConflict) {
				t.Errorf("a token over the bound: %v, want refused", err)
			}
		})
	}
}
