package supervise

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/knitdev/knit/test/eventually"
)

func TestBackoffIsTheKubeletsRestartBackoff(t *testing.T) {
	var b Backoff
	steps := []struct {
		ranFor time.Duration
		want   time.Duration
	}{
		{time.Second, 0},
		{time.Second, 10 * time.Second},
		{time.Second, 20 * time.Second},
		{time.Second, 40 * time.Second},
		{time.Second, 80 * time.Second},
		{time.Second, 160 * time.Second},
		{time.Second, 5 * time.Minute},
		{time.Second, 5 * time.Minute},
		{9 * time.Minute, 5 * time.Minute},
		{10 * time.Minute, 0},
		{time.Second, 10 * time.Second},
	}
	for i, s := range steps {
		if got := b.Next(s.ranFor); got != s.want {
			t.Errorf("restart %d after a run of %v: back-off %v, want %v", i+1, s.ranFor, got, s.want)
		}
	}
}

// fakeClock hands every wait to the test, which lets it end.
type fakeClock struct{ waits chan time.Duration }

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.waits <- d
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func TestProcessRestartsWithBackoffAndCountsRestarts(t *testing.T) {
	clock := &fakeClock{waits: make(chan time.Duration)}
	p, err := Start(Config{
		Name:       "false",
		Command:    func() (*exec.Cmd, error) { return exec.Command("false"), nil },
		After:      clock.after,
		Supervised: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for range 3 {
		select {
		case d := <-clock.waits:
			got = append(got, d)
		case <-time.After(time.Minute):
			t.Fatal("no restart")
		}
	}
	go func() {
		for range clock.waits {
		}
	}()
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	close(clock.waits)
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("back-offs %v, want %v", got, want)
		}
	}
	if st := p.Status(); st.Restarts < 2 || st.Running || st.LastExit == "" {
		t.Errorf("status %+v: want at least 2 restarts, not running, an exit", st)
	}
}

func TestProcessStopsARunAndNeverRestartsIt(t *testing.T) {
	p, err := Start(Config{Name: "sleep", Command: func() (*exec.Cmd, error) { return exec.Command("sleep", "60"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	p.Supervise()
	if p.PID() == 0 {
		t.Fatal("no pid while running")
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); st.Running || st.Restarts != 0 {
		t.Errorf("status %+v after Stop: want stopped, no restart", st)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) {
		t.Errorf("last exit %v, want the signal's", p.Err())
	}
}

func TestProcessKilledIsRestartedWithANewPID(t *testing.T) {
	p, err := Start(Config{Name: "sleep", Command: func() (*exec.Cmd, error) { return exec.Command("sleep", "60"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(5 * time.Second)
	p.Supervise()
	first := p.PID()
	if err := exec.Command("kill", "-9", strconv.Itoa(first)).Run(); err != nil {
		t.Fatal(err)
	}
	eventually.Within(t, 30*time.Second, func(context.Context) error {
		if st := p.Status(); !st.Running || st.PID == first || st.Restarts != 1 {
			return errors.New("not restarted yet")
		}
		return nil
	})
}
