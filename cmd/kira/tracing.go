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
)

// setupTracing configures OpenTelemetry the standard way: the SDK's
// environment variables (OTEL_TRACES_EXPORTER otlp|console|none,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL grpc|http/protobuf,
// OTEL_SERVICE_NAME, default kira, OTEL_RESOURCE_ATTRIBUTES), read by the
// contrib autoexport package. Nothing is exported when OTEL_TRACES_EXPORTER is
// unset, unless --trace-stdout asks for the console. Trace context travels
// in W3C traceparent headers. The returned function flushes and stops it.
func setupTracing(ctx context.Context, traceStdout bool, cluster string) (func(), error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	var exp sdktrace.SpanExporter
	var err error
	switch {
	case traceStdout:
		exp, err = stdouttrace.New(stdouttrace.WithPrettyPrint())
	case os.Getenv("OTEL_TRACES_EXPORTER") == "":
		return func() {}, nil
	default:
		exp, err = autoexport.NewSpanExporter(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("kira run: tracing: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceVersion(version), attribute.String("kira.cluster", cluster)}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		attrs = append(attrs, semconv.ServiceName("kira"))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithHost(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("kira run: tracing resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return func() { tp.Shutdown(context.Background()) }, nil
}
