package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stado/stado/internal/clitest"
)

// otlpReceiver is an OTLP/HTTP receiver on loopback that decodes what
// arrives.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   map[string]int // span name → count
	metrics map[string]bool
	service string
	errs    []error
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.errs = append(o.errs, err)
		w.WriteHeader(400)
		return
	}
	switch r.URL.Path {
	case "/v1/traces":
		var req tracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			o.errs = append(o.errs, err)
			w.WriteHeader(400)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					o.service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					o.spans[s.Name]++
				}
			}
		}
		out, _ := proto.Marshal(&tracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	case "/v1/metrics":
		var req metricspb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			o.errs = append(o.errs, err)
			w.WriteHeader(400)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					o.metrics[m.Name] = true
				}
			}
		}
		out, _ := proto.Marshal(&metricspb.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	default:
		w.WriteHeader(404)
	}
}

// A tick configured only by the standard OTEL_* variables exports its spans
// and metrics over OTLP/HTTP to a receiver on loopback.
func TestTickExportsOverOTLPHTTP(t *testing.T) {
	rcv := &otlpReceiver{spans: map[string]int{}, metrics: map[string]bool{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	f := newFleet(t, "fs")
	api := f.newService("api", "web-1", "api.service", false)
	f.applyRegistry([]service{api}, "")
	f.applyPolicy(enforcePolicy)
	f.publish(map[string]map[string]string{"web-1": {"api.service": "failed"}})
	r := clitest.Run(t, clitest.Cmd{
		Args: []string{"--store", f.store, "--config", f.config, "optimize", "run"},
		Env: append(f.env,
			"OTEL_TRACES_EXPORTER=otlp", "OTEL_METRICS_EXPORTER=otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL),
	})
	if r.Code != 0 {
		t.Fatalf("exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.errs) > 0 {
		t.Fatalf("the receiver could not decode: %v", rcv.errs)
	}
	for _, name := range []string{"stado.tick", "stado.evidence", "stado.repair", "stado.lease.take", "stado.channel.run", "stado.verify", "stado.lease.release"} {
		if rcv.spans[name] == 0 {
			t.Errorf("no %s span arrived (got %v)", name, rcv.spans)
		}
	}
	if rcv.service != "stado" {
		t.Errorf("service.name %q", rcv.service)
	}
	for _, name := range []string{"stado.ticks", "stado.outcomes", "stado.lease.operations", "stado.repair.duration", "stado.tick.duration", "stado.breaker.state"} {
		if !rcv.metrics[name] {
			t.Errorf("no %s metric arrived (got %v)", name, rcv.metrics)
		}
	}
}
