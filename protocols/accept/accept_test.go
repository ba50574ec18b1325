package accept

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestTemporaryErrorsAreRetriedAndOthersEndTheLoop(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"out of file descriptors", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{"aborted before accepted", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{"a deadline", fmt.Errorf("accept: %w", os.ErrDeadlineExceeded), true},
		{"a message naming no descriptors left", errors.New("accept tcp: too many open files"), true},
		{"a closed listener", net.ErrClosed, false},
		{"anything else", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Temporary(tt.err); got != tt.want {
				t.Errorf("Temporary(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestPausesDoubleWithinTheirBoundsAndStartOverAfterAnAccept(t *testing.T) {
	temp := errors.New("too many open files")
	var b Backoff
	var got []time.Duration
	for range 10 {
		d, ok := b.Next(temp)
		if !ok {
			t.Fatal("a temporary error was not retried")
		}
		got = append(got, d)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if d, _ := b.Next(temp); d != DefaultMin {
		t.Errorf("after Reset the pause is %v, want %v", d, DefaultMin)
	}
	if _, ok := b.Next(errors.New("boom")); ok {
		t.Error("a permanent error was retried")
	}
}
