package accept

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func TestServeAnswersEachConnectionAndClosesEveryOneWhenItsContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	handled := make(chan struct{}, 2)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, slog.New(slog.DiscardHandler), func(_ context.Context, c net.Conn) {
			c.Write([]byte("hi"))
			handled <- struct{}{}
			io.Copy(io.Discard, c) // until Serve closes it
		})
	}()
	var clients []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
		buf := make([]byte, 2)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
			t.Fatalf("greeting %q, %v", buf, err)
		}
	}
	<-handled
	<-handled
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v, want nil once its context ended", err)
	}
	for _, c := range clients {
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("a connection after Serve returned reads %v, want EOF", err)
		}
	}
	// Asked of the listener itself: a dial of its port could reach another
	// process's listener that took the freed port meanwhile.
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the listener accepts after Serve returned: %v, want net.ErrClosed", err)
	}
}

func TestServeEndsWithAListenersPermanentError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = Serve(t.Context(), ln, slog.New(slog.DiscardHandler), func(context.Context, net.Conn) {})
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve = %v, want the listener's error", err)
	}
}
