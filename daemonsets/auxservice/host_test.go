package auxservice

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a service that remembers what it was told.
type recorder struct {
	name  string
	meta  []byte
	serve func(ctx context.Context) error

	mu      sync.Mutex
	inits   []Application
	stopped []yarnid.ApplicationID
}

func (r *recorder) Name() string     { return r.name }
func (r *recorder) Metadata() []byte { return r.meta }
func (r *recorder) Serve(ctx context.Context) error {
	if r.serve != nil {
		return r.serve(ctx)
	}
	<-ctx.Done()
	return nil
}

func (r *recorder) InitializeApplication(_ context.Context, app Application) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inits = append(r.inits, app)
	return nil
}

func (r *recorder) StopApplication(_ context.Context, id yarnid.ApplicationID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = append(r.stopped, id)
	return nil
}

var app1 = yarnid.ApplicationID{ClusterTimestamp: 1795680442682, ID: 3}

func newHost(t *testing.T, services ...Service) (*Host, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	h, err := NewHost(HostConfig{Client: client, NodeName: "node-1", Services: services})
	if err != nil {
		t.Fatal(err)
	}
	return h, client
}

func published(t *testing.T, client *fake.Clientset) (map[string][]byte, bool) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[launch.AnnotationAuxServices]
	if !ok {
		return nil, false
	}
	services, err := launch.DecodeAuxServices(v)
	if err != nil {
		t.Fatal(err)
	}
	return services, true
}

// waitFor polls cond until it holds or the test's time runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("never: %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestHostPublishesItsServicesWhileTheyServeAndTakesThemOffAfter(t *testing.T) {
	shuffle := &recorder{name: launch.ShuffleService, meta: launch.PortMetadata(13562)}
	h, client := newHost(t, shuffle)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	waitFor(t, "services published", func() bool { _, ok := published(t, client); return ok })
	got, _ := published(t, client)
	if want := map[string][]byte{launch.ShuffleService: {0, 0, 0x34, 0xfa}}; !maps.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("published %v, want %v", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, ok := published(t, client); ok {
		t.Errorf("still published after the host stopped: %v", got)
	}
}

func TestHostStopsWhenAServiceFails(t *testing.T) {
	broken := &recorder{name: "broken", serve: func(context.Context) error { return errors.New("port gone") }}
	healthy := &recorder{name: launch.ShuffleService, meta: launch.PortMetadata(13562)}
	h, client := newHost(t, broken, healthy)
	err := h.Run(t.Context())
	if err == nil || err.Error() != "auxservice: broken: port gone" {
		t.Fatalf("Run = %v, want the broken service's error", err)
	}
	if got, ok := published(t, client); ok {
		t.Errorf("a failed host still advertises %v", got)
	}
}

func TestHostRefusesTwoServicesOfOneName(t *testing.T) {
	_, err := NewHost(HostConfig{Client: fake.NewClientset(), NodeName: "node-1",
		Services: []Service{&recorder{name: "a"}, &recorder{name: "a"}}})
	if err == nil {
		t.Fatal("NewHost accepted two services named a")
	}
}

func TestHostPassesServiceDataToTheServiceItNames(t *testing.T) {
	shuffle := &recorder{name: launch.ShuffleService}
	other := &recorder{name: "other"}
	h, _ := newHost(t, shuffle, other)
	tests := []struct {
		name    string
		data    map[string][]byte
		wantErr bool
		// inits of shuffle and other after the call
		shuffleInits, otherInits int
	}{
		{name: "data for the shuffle reaches only the shuffle", data: map[string][]byte{launch.ShuffleService: []byte("token")}, shuffleInits: 1},
		{name: "no data tells no service", data: nil, shuffleInits: 1},
		{name: "data for a service the node does not run is an error", data: map[string][]byte{"spark_shuffle": nil}, wantErr: true, shuffleInits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.InitializeApplication(t.Context(), "alice", app1, tt.data)
			if (err != nil) != tt.wantErr {
				t.Fatalf("InitializeApplication = %v, want error %v", err, tt.wantErr)
			}
			if len(shuffle.inits) != tt.shuffleInits || len(other.inits) != tt.otherInits {
				t.Errorf("inits: shuffle %d, other %d; want %d, %d", len(shuffle.inits), len(other.inits), tt.shuffleInits, tt.otherInits)
			}
		})
	}
	if got := shuffle.inits[0]; got.User != "alice" || got.ID != app1 || string(got.ServiceData) != "token" {
		t.Errorf("shuffle told %+v", got)
	}
}

func TestHostTellsEveryServiceThatAnApplicationEnded(t *testing.T) {
	shuffle, other := &recorder{name: launch.ShuffleService}, &recorder{name: "other"}
	h, _ := newHost(t, shuffle, other)
	if err := h.StopApplication(t.Context(), app1); err != nil {
		t.Fatal(err)
	}
	if len(shuffle.stopped) != 1 || len(other.stopped) != 1 || shuffle.stopped[0] != app1 {
		t.Errorf("stopped: shuffle %v, other %v", shuffle.stopped, other.stopped)
	}
}
