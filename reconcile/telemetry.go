package reconcile

import (
	"context"
	"time"

	"github.com/stado/stado/reports"
)

// Telemetry receives what a tick does. The OpenTelemetry implementation
// lives with the command that configures exporters; the tick only reports.
type Telemetry interface {
	// StartTick starts the tick's span; end receives the report (nil when
	// none) and the tick's error.
	StartTick(ctx context.Context) (context.Context, func(*reports.Report, error))
	// StartSpan starts a child span with attributes given as key, value
	// pairs of strings.
	StartSpan(ctx context.Context, name string, attrs ...string) (context.Context, func())
	// Outcome counts one service's outcome.
	Outcome(o reports.Outcome)
	// LeaseResult counts one lease operation's result.
	LeaseResult(result string)
	// RepairDuration records how long a repair command ran.
	RepairDuration(action string, d time.Duration, ok bool)
}

type nopTelemetry struct{}

func (nopTelemetry) StartTick(ctx context.Context) (context.Context, func(*reports.Report, error)) {
	return ctx, func(*reports.Report, error) {}
}
func (nopTelemetry) StartSpan(ctx context.Context, _ string, _ ...string) (context.Context, func()) {
	return ctx, func() {}
}
func (nopTelemetry) Outcome(reports.Outcome)                    {}
func (nopTelemetry) LeaseResult(string)                         {}
func (nopTelemetry) RepairDuration(string, time.Duration, bool) {}
