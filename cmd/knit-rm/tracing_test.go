package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.uber.org/fx/fxtest"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
)

func TestTracingIsOffWithoutAnEndpoint(t *testing.T) {
	lc := fxtest.NewLifecycle(t)
	rec, err := newTracer(lifecycle.Runner{Lifecycle: lc, Logger: slog.New(slog.DiscardHandler)}, flags{})
	if err != nil || rec != nil {
		t.Fatalf("tracer %v, %v; want none", rec, err)
	}
}

// TestSpansReachTheOTLPEndpointWhenTheRMStops: the exporter batches; the
// RM's stop flushes what it holds to the collector, over OTLP/HTTP.
func TestSpansReachTheOTLPEndpointWhenTheRMStops(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			bodies = append(bodies, b)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	lc := fxtest.NewLifecycle(t)
	tp, err := newTracerProvider(lifecycle.Runner{Lifecycle: lc, Logger: slog.New(slog.DiscardHandler)}, collector.URL+"/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	lc.RequireStart()
	_, span := tp.Tracer("test").Start(context.Background(), "application")
	span.End()
	lc.RequireStop()
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 || !bytes.Contains(bodies[0], []byte("knit-rm")) || !bytes.Contains(bodies[0], []byte("application")) {
		t.Fatalf("the collector got %d trace exports; want one naming the service and the span", len(bodies))
	}
}
