package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracing is OpenTelemetry configured the standard way: the SDK's
// environment variables (OTEL_TRACES_EXPORTER otlp|console|none,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL grpc|http/protobuf,
// OTEL_SERVICE_NAME, default kira, OTEL_RESOURCE_ATTRIBUTES), read by the
// contrib autoexport package. Trace context travels in W3C traceparent
// headers.
type tracing struct {
	stdout bool
	base   *resource.Resource // service, version, cluster, host, OTEL_RESOURCE_ATTRIBUTES
}

// setupTracing returns nil when nothing is to be exported:
// OTEL_TRACES_EXPORTER unset and no --trace-stdout.
func setupTracing(ctx context.Context, traceStdout bool, cluster string) (*tracing, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !traceStdout && os.Getenv("OTEL_TRACES_EXPORTER") == "" {
		return nil, nil
	}
	attrs := []attribute.KeyValue{semconv.ServiceVersion(version), attribute.String("kira.cluster", cluster)}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		attrs = append(attrs, semconv.ServiceName("kira"))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithHost(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("kira run: tracing resource: %w", err)
	}
	t := &tracing{stdout: traceStdout, base: res}
	exp, err := t.exporter(ctx) // a bad variable fails at start, not at the first join
	if err != nil {
		return nil, err
	}
	exp.Shutdown(ctx)
	return t, nil
}

// exporter is a new span exporter as the variables say.
func (t *tracing) exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	if t.stdout {
		exp, err = stdouttrace.New(stdouttrace.WithPrettyPrint())
	} else {
		exp, err = autoexport.NewSpanExporter(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("kira run: tracing: %w", err)
	}
	return exp, nil
}

// forMember is incarnation.Config.Tracing: a tracer provider whose resource also
// names the incarnation (service.instance.id and kira.member are its
// member id), and the function that flushes and stops it.
func (t *tracing) forMember(id string) (trace.TracerProvider, func()) {
	res, err := resource.Merge(t.base, resource.NewSchemaless(semconv.ServiceInstanceID(id), attribute.String("kira.member", id)))
	if err != nil {
		res = t.base
	}
	exp, err := t.exporter(context.Background())
	if err != nil {
		return noop.NewTracerProvider(), func() {} // unlikely: setupTracing built one with the same variables
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, func() { tp.Shutdown(context.Background()) }
}
