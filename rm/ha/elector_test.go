package ha

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/knitdev/knit/test/eventually"
)

// runElector runs an elector of identity on client until the returned
// stop is called; stop waits for Run and returns its error.
func runElector(t *testing.T, client *fake.Clientset, identity string) (*Elector, func() error) {
	t.Helper()
	e, err := NewElector(Config{Client: client, Namespace: "knit", Identity: identity,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() { defer wg.Done(); runErr = e.Run(ctx) }()
	var once sync.Once
	stop := func() error {
		once.Do(func() { cancel(); wg.Wait() })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return e, stop
}

func TestOneReplicaLeadsAndTheOtherIsFenced(t *testing.T) {
	client := fake.NewClientset()
	rm1, stop1 := runElector(t, client, "rm1")
	<-rm1.Elected()
	rm2, _ := runElector(t, client, "rm2")
	eventually.True(t, 10*time.Second, "rm2 sees rm1 lead", func() bool { return rm2.Leader() == "rm1" })

	if err := rm1.Fence(); err != nil {
		t.Errorf("leader's fence: %v", err)
	}
	if err := rm2.Fence(); !errors.Is(err, ErrNotLeader) {
		t.Errorf("standby's fence = %v, want ErrNotLeader", err)
	}
	select {
	case <-rm2.Elected():
		t.Fatal("rm2 elected while rm1 leads")
	default:
	}

	// rm1 stops cleanly: it releases the Lease, rm2 takes it, and rm1 may
	// write nothing more.
	if err := stop1(); err != nil {
		t.Errorf("rm1's Run after a clean stop = %v, want nil", err)
	}
	if err := rm1.Fence(); !errors.Is(err, ErrNotLeader) {
		t.Errorf("stopped leader's fence = %v, want ErrNotLeader", err)
	}
	select {
	case <-rm1.Lost():
	default:
		t.Error("rm1's Lost not closed after it stopped leading")
	}
	select {
	case <-rm2.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("rm2 not elected after rm1 released the Lease")
	}
	if err := rm2.Fence(); err != nil {
		t.Errorf("new leader's fence: %v", err)
	}
}

func TestARestartedReplicaTakesItsOwnLeaseBack(t *testing.T) {
	client := fake.NewClientset()
	first, _ := runElector(t, client, "rm1")
	<-first.Elected()
	// A second process with the same id (the same replica, restarted
	// after a kill, its Lease unreleased) leads without waiting the lease
	// out.
	again, _ := runElector(t, client, "rm1")
	select {
	case <-again.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("restarted replica not elected")
	}
}

func TestNewElectorNeedsClientNamespaceAndIdentity(t *testing.T) {
	client := fake.NewClientset()
	for _, cfg := range []Config{
		{Namespace: "knit", Identity: "rm1"},
		{Client: client, Identity: "rm1"},
		{Client: client, Namespace: "knit"},
	} {
		if _, err := NewElector(cfg); err == nil {
			t.Errorf("NewElector(%+v) = nil error", cfg)
		}
	}
}
