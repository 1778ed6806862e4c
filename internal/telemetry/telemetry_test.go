package telemetry_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/internal/telemetry"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
	"github.com/stado/stado/reconcile"
	"github.com/stado/stado/reconcile/beacon"
	"github.com/stado/stado/reconcile/registry"
	"github.com/stado/stado/reports"
)

// A real tick over a mem store, with the SDK's in-memory span exporter and
// a manual metric reader: the tick's span tree and its measurements.
func TestTickSpansAndMetricsInMemory(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	p, err := telemetry.Setup(ctx, telemetry.Options{Version: "test", SpanExporters: []sdktrace.SpanExporter{spans}, Readers: []sdkmetric.Reader{reader}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := telemetry.NewRecorder(p)
	if err != nil {
		t.Fatal(err)
	}

	store := objstore.NewMem(clock.Real{})
	if _, err := policy.Apply(ctx, store, []byte("policy_version: t\nmode: enforce-safe\nevidence:\n  verify_timeout_seconds: 5\n"), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := registry.Apply(ctx, store, []byte("services:\n  - {name: a, host: h1, unit: a.service, repair: restart, channel: exec}\n  - {name: b, host: h1, unit: b.service, repair: restart, channel: exec}\n"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := beacon.Publish(ctx, store, "h1", []beacon.Unit{{Unit: "a.service", ActiveState: beacon.Failed}, {Unit: "b.service", ActiveState: beacon.Active}}); err != nil {
		t.Fatal(err)
	}
	markers := t.TempDir()
	dir, _ := filepath.Abs("testdata")
	cfg := localconfig.Default()
	cfg.Channels.Exec.Actions = map[string][]string{
		"restart": {filepath.Join(dir, "restart.sh"), "{unit}"},
		"check":   {filepath.Join(dir, "check.sh"), "{unit}"},
	}
	r, err := reconcile.New(reconcile.Config{Store: store, Owner: "test/1/x", Local: cfg, Telemetry: rec,
		ChannelEnv: []string{"PATH=" + os.Getenv("PATH"), "MARKER_DIR=" + markers}, VerifyInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Tick(ctx, reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary[reports.Reconciled] != 1 || rep.Summary[reports.Healthy] != 1 {
		t.Fatalf("tick summary %v", rep.Summary)
	}
	// Flush, not shut down: the in-memory exporter forgets on shutdown.
	if err := p.Tracer.(*sdktrace.TracerProvider).ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)

	// Spans: the tick, its evidence, the repair, and the repair's children.
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[s.Name] = s
	}
	tick, ok := byName["stado.tick"]
	if !ok {
		t.Fatalf("no tick span among %v", names(spans.GetSpans()))
	}
	parentOf := map[string]string{
		"stado.evidence":      "stado.tick",
		"stado.repair":        "stado.tick",
		"stado.lease.take":    "stado.repair",
		"stado.channel.run":   "stado.repair",
		"stado.verify":        "stado.repair",
		"stado.lease.release": "stado.repair",
	}
	for child, parent := range parentOf {
		c, ok := byName[child]
		if !ok {
			t.Errorf("no %s span among %v", child, names(spans.GetSpans()))
			continue
		}
		if c.Parent.SpanID() != byName[parent].SpanContext.SpanID() {
			t.Errorf("%s's parent is not %s", child, parent)
		}
		if c.SpanContext.TraceID() != tick.SpanContext.TraceID() {
			t.Errorf("%s is in another trace", child)
		}
	}
	if !hasAttr(byName["stado.repair"].Attributes, "stado.subject", "service:h1:a.service") {
		t.Errorf("repair span attributes %v", byName["stado.repair"].Attributes)
	}

	// Metrics.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var repairCount uint64
	var breaker int64 = -1
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					key := m.Name
					for _, kv := range dp.Attributes.ToSlice() {
						key += "/" + kv.Value.String()
					}
					got[key] += dp.Value
				}
			case metricdata.Histogram[float64]:
				if m.Name == "stado.repair.duration" {
					for _, dp := range d.DataPoints {
						repairCount += dp.Count
					}
				}
			case metricdata.Gauge[int64]:
				if m.Name == "stado.breaker.state" && len(d.DataPoints) == 1 {
					breaker = d.DataPoints[0].Value
				}
			}
		}
	}
	for key, want := range map[string]int64{
		"stado.ticks/ok":                  1,
		"stado.outcomes/reconciled":       1,
		"stado.outcomes/healthy":          1,
		"stado.lease.operations/taken":    1,
		"stado.lease.operations/released": 1,
	} {
		if got[key] != want {
			t.Errorf("%s = %d, want %d (all: %v)", key, got[key], want, got)
		}
	}
	if repairCount != 1 || breaker != telemetry.BreakerClosed {
		t.Errorf("repair duration count %d, breaker gauge %d", repairCount, breaker)
	}
}

func names(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func hasAttr(kvs []attribute.KeyValue, k, v string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == k && kv.Value.String() == v {
			return true
		}
	}
	return false
}
