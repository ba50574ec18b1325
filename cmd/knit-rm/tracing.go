package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.uber.org/fx"

	"github.com/knitdev/knit/cmd/internal/lifecycle"
	"github.com/knitdev/knit/rm/apptrace"
)

// otlpEndpointFromEnv is the OTLP traces endpoint OpenTelemetry's own
// variables name, the traces-only one first.
func otlpEndpointFromEnv() string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// newTracer is the applications' tracer: nil (off) without an OTLP
// endpoint.
func newTracer(run lifecycle.Runner, f flags) (*apptrace.Recorder, error) {
	tp, err := newTracerProvider(run, f.otlpEndpoint)
	if tp == nil || err != nil {
		return nil, err
	}
	return apptrace.New(tp), nil
}

// newTracerProvider batches spans to endpoint over OTLP/HTTP, flushed when
// the RM stops; nil for no endpoint.
func newTracerProvider(run lifecycle.Runner, endpoint string) (*sdktrace.TracerProvider, error) {
	if endpoint == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("knit-rm"))))
	run.Lifecycle.Append(fx.StopHook(tp.Shutdown))
	run.Logger.Info("tracing applications", "otlp_endpoint", endpoint)
	return tp, nil
}
