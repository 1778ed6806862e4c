// Package telemetry owns stado's OpenTelemetry: providers configured only by
// the standard OTEL_* environment variables (through the contrib autoexport
// package: OTLP, console, none), a Prometheus view of the same metrics for
// `stado optimize serve --listen`, and the Recorder through which a tick
// reports its spans and measurements.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/stado/stado/reports"
)

// Options configure Setup.
type Options struct {
	// Version is stado's version, recorded as service.version.
	Version string
	// Prometheus adds a Prometheus reader whose registry Handler serves.
	Prometheus bool
	// Extra readers and span exporters, for tests (in-memory exporters).
	Readers       []sdkmetric.Reader
	SpanExporters []sdktrace.SpanExporter
}

// Providers are the configured OpenTelemetry providers.
type Providers struct {
	Tracer trace.TracerProvider
	Meter  metric.MeterProvider
	// Handler serves the Prometheus exposition of the metrics (nil unless
	// Options.Prometheus).
	Handler  http.Handler
	shutdown []func(context.Context) error
}

// Shutdown flushes and stops the providers.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range p.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// discardSpans is the span exporter when OTEL_TRACES_EXPORTER is unset: a
// command-line tool must not try to reach a collector nobody configured.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// Setup builds the providers from the OTEL_* environment. With none set,
// nothing is exported (the Prometheus view, if asked for, still works).
func Setup(ctx context.Context, o Options) (*Providers, error) {
	// Ours first, the environment's (OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES) after, so that operators can override.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "stado"), attribute.String("service.version", o.Version)),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	p := &Providers{}

	unset := false
	spanExp, err := autoexport.NewSpanExporter(ctx, autoexport.WithFallbackSpanExporter(
		func(context.Context) (sdktrace.SpanExporter, error) { unset = true; return discardSpans{}, nil }))
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry traces (OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_*): %w", err)
	}
	exporters := append([]sdktrace.SpanExporter(nil), o.SpanExporters...)
	if !unset && !autoexport.IsNoneSpanExporter(spanExp) {
		exporters = append(exporters, spanExp)
	}
	if len(exporters) == 0 {
		p.Tracer = tracenoop.NewTracerProvider()
	} else {
		topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		for _, e := range exporters {
			topts = append(topts, sdktrace.WithBatcher(e))
		}
		tp := sdktrace.NewTracerProvider(topts...)
		p.Tracer = tp
		p.shutdown = append(p.shutdown, tp.Shutdown)
	}

	readers := append([]sdkmetric.Reader(nil), o.Readers...)
	unsetMetrics := false
	reader, err := autoexport.NewMetricReader(ctx, autoexport.WithFallbackMetricReader(
		func(context.Context) (sdkmetric.Reader, error) {
			unsetMetrics = true
			return sdkmetric.NewManualReader(), nil
		}))
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry metrics (OTEL_METRICS_EXPORTER and OTEL_EXPORTER_OTLP_*): %w", err)
	}
	if !unsetMetrics && !autoexport.IsNoneMetricReader(reader) {
		readers = append(readers, reader)
	}
	if o.Prometheus {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		readers = append(readers, exp)
		p.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	for _, r := range readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	p.Meter = mp
	p.shutdown = append(p.shutdown, mp.Shutdown)
	return p, nil
}

// Recorder turns what a tick reports into spans and measurements. It
// implements reconcile.Telemetry.
type Recorder struct {
	tracer       trace.Tracer
	ticks        metric.Int64Counter
	skipped      metric.Int64Counter
	outcomes     metric.Int64Counter
	leases       metric.Int64Counter
	repairs      metric.Float64Histogram
	tickDuration metric.Float64Histogram
	breaker      atomic.Int64
}

// Breaker states as the stado.breaker.state gauge reports them.
const (
	BreakerClosed   = 0
	BreakerHalfOpen = 1
	BreakerOpen     = 2
)

// NewRecorder makes the instruments.
func NewRecorder(p *Providers) (*Recorder, error) {
	m := p.Meter.Meter("github.com/stado/stado")
	r := &Recorder{tracer: p.Tracer.Tracer("github.com/stado/stado")}
	var err error
	var errs []error
	r.ticks, err = m.Int64Counter("stado.ticks", metric.WithDescription("Reconciliation ticks run, by result (ok, repair_failed, error)."))
	errs = append(errs, err)
	r.skipped, err = m.Int64Counter("stado.ticks.skipped", metric.WithDescription("Scheduled ticks skipped because the previous one was still running."))
	errs = append(errs, err)
	r.outcomes, err = m.Int64Counter("stado.outcomes", metric.WithDescription("Service outcomes recorded in reports, by classification."))
	errs = append(errs, err)
	r.leases, err = m.Int64Counter("stado.lease.operations", metric.WithDescription("Lease takes and releases, by result."))
	errs = append(errs, err)
	r.repairs, err = m.Float64Histogram("stado.repair.duration", metric.WithUnit("s"), metric.WithDescription("How long repair commands ran, by action and result."))
	errs = append(errs, err)
	r.tickDuration, err = m.Float64Histogram("stado.tick.duration", metric.WithUnit("s"), metric.WithDescription("How long ticks took."))
	errs = append(errs, err)
	_, err = m.Int64ObservableGauge("stado.breaker.state",
		metric.WithDescription("The circuit breaker as the last tick saw it: 0 closed, 1 half-open, 2 open."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(r.breaker.Load())
			return nil
		}))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("create metrics: %w", err)
	}
	return r, nil
}

// StartTick implements reconcile.Telemetry.
func (r *Recorder) StartTick(ctx context.Context) (context.Context, func(*reports.Report, error)) {
	start := time.Now()
	ctx, span := r.tracer.Start(ctx, "stado.tick")
	return ctx, func(rep *reports.Report, err error) {
		result := "ok"
		switch {
		case rep == nil:
			result = "error"
		case rep.FailedCount() > 0:
			result = "repair_failed"
		}
		if rep != nil {
			span.SetAttributes(attribute.String("stado.run_id", rep.RunID), attribute.String("stado.mode", rep.Mode),
				attribute.Int("stado.services", rep.Summary["services"]), attribute.Int("stado.repair_failed", rep.FailedCount()))
			switch rep.Breaker {
			case "open":
				r.breaker.Store(BreakerOpen)
			case "half-open":
				r.breaker.Store(BreakerHalfOpen)
			default:
				r.breaker.Store(BreakerClosed)
			}
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			if rep != nil {
				result = "error"
			}
		}
		span.End()
		r.ticks.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", result)))
		r.tickDuration.Record(context.Background(), time.Since(start).Seconds())
	}
}

// StartSpan implements reconcile.Telemetry.
func (r *Recorder) StartSpan(ctx context.Context, name string, attrs ...string) (context.Context, func()) {
	kv := make([]attribute.KeyValue, 0, len(attrs)/2)
	for i := 0; i+1 < len(attrs); i += 2 {
		kv = append(kv, attribute.String("stado."+attrs[i], attrs[i+1]))
	}
	ctx, span := r.tracer.Start(ctx, "stado."+name, trace.WithAttributes(kv...))
	return ctx, func() { span.End() }
}

// Outcome implements reconcile.Telemetry.
func (r *Recorder) Outcome(o reports.Outcome) {
	r.outcomes.Add(context.Background(), 1, metric.WithAttributes(attribute.String("classification", o.Classification)))
}

// LeaseResult implements reconcile.Telemetry.
func (r *Recorder) LeaseResult(result string) {
	r.leases.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", result)))
}

// RepairDuration implements reconcile.Telemetry.
func (r *Recorder) RepairDuration(action string, d time.Duration, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	r.repairs.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("action", action), attribute.String("result", result)))
}

// TickSkipped counts a scheduled tick skipped because one was running.
func (r *Recorder) TickSkipped() { r.skipped.Add(context.Background(), 1) }
