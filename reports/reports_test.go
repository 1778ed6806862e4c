package reports_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reports"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

func report(created time.Time, outcomes ...reports.Outcome) *reports.Report {
	id := reports.RunID(created)
	r := &reports.Report{SchemaVersion: 1, RunID: id, DecisionID: reports.DecisionID(id), CreatedAt: created, FinishedAt: created.Add(time.Second),
		Reconciler: "ctl-1/1/ab", Mode: "enforce-safe", PolicyVersion: "p", Breaker: "closed", Outcomes: outcomes}
	r.Finalize()
	return r
}

func TestRunIDIsChronologicalAndDesignShaped(t *testing.T) {
	if got := reports.RunID(t0); got != "2026-11-30T12-00-00.123456789Z" {
		t.Fatalf("RunID = %q", got)
	}
	if reports.DecisionID("x") != "service-reconcile-x" {
		t.Fatal("decision id")
	}
	if a, b := reports.RunID(t0), reports.RunID(t0.Add(time.Nanosecond)); a >= b {
		t.Fatalf("%s !< %s", a, b)
	}
}

func TestFinalizeSortsAndCounts(t *testing.T) {
	r := report(t0,
		reports.Outcome{Host: "web-2", Unit: "a", Classification: reports.Healthy},
		reports.Outcome{Host: "web-1", Unit: "b", Classification: reports.LeaseBlocked},
		reports.Outcome{Host: "web-1", Unit: "a", Classification: reports.RepairFailed},
		reports.Outcome{Host: "web-1", Unit: "c", Classification: reports.ActionLimit},
	)
	var order []string
	for _, o := range r.Outcomes {
		order = append(order, o.Host+"/"+o.Unit)
	}
	if strings.Join(order, ",") != "web-1/a,web-1/b,web-1/c,web-2/a" {
		t.Fatalf("order %v", order)
	}
	if r.Summary["services"] != 4 || r.Summary[reports.Healthy] != 1 || r.BlockedCount() != 2 || r.FailedCount() != 1 {
		t.Fatalf("summary %v", r.Summary)
	}
	if _, ok := r.Summary[reports.Reconciled]; ok {
		t.Fatal("absent classifications must be absent from the summary")
	}
}

func TestSaveLatestAndCollision(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem(clock.NewFake(t0))
	a := report(t0, reports.Outcome{Host: "h", Unit: "u", Classification: reports.Healthy})
	b := report(t0, reports.Outcome{Host: "h", Unit: "u", Classification: reports.Reconciled}) // same start
	b.Reconciler = "ctl-2/2/cd"
	idA, err := reports.Save(ctx, s, a)
	if err != nil {
		t.Fatal(err)
	}
	idB, err := reports.Save(ctx, s, b)
	if err != nil {
		t.Fatal(err)
	}
	if idA == idB || !strings.HasPrefix(idB, idA+"-") {
		t.Fatalf("a colliding run id must get a suffix: %q %q", idA, idB)
	}
	for id, want := range map[string]string{idA: "ctl-1/1/ab", idB: "ctl-2/2/cd"} {
		r, err := reports.Get(ctx, s, id)
		if err != nil || r == nil || r.Reconciler != want {
			t.Fatalf("run %s: %+v %v", id, r, err)
		}
	}
	latest, err := reports.Latest(ctx, s)
	if err != nil || latest.RunID != idB {
		t.Fatalf("latest %+v %v", latest, err)
	}
	// Saving the same report again (an SDK retry that had committed) is
	// recognised as ours: no second copy.
	if id, err := reports.Save(ctx, s, a); err != nil || id != idA {
		t.Fatalf("re-save: %q %v", id, err)
	}
	ids, _ := reports.RunIDs(ctx, s)
	if len(ids) != 2 {
		t.Fatalf("runs %v", ids)
	}
}

func TestRetainDeletesOldestBounded(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem(clock.NewFake(t0))
	for i := 0; i < 10; i++ {
		if _, err := reports.Save(ctx, s, report(t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	n, err := reports.Retain(ctx, s, 4, 3)
	if err != nil || n != 3 {
		t.Fatalf("first retain: %d %v", n, err)
	}
	n, err = reports.Retain(ctx, s, 4, 3)
	if err != nil || n != 3 {
		t.Fatalf("second retain: %d %v", n, err)
	}
	n, _ = reports.Retain(ctx, s, 4, 3)
	ids, _ := reports.RunIDs(ctx, s)
	if n != 0 || len(ids) != 4 || ids[0] != reports.RunID(t0.Add(6*time.Minute)) {
		t.Fatalf("after retention: %d deleted, kept %v", n, ids)
	}
}

func TestParseRejectsCorruptReports(t *testing.T) {
	for _, b := range []string{"", "{", "null", `{"schema_version":2,"run_id":"x","created_at":"2026-11-30T12:00:00Z"}`, `{"schema_version":1,"created_at":"2026-11-30T12:00:00Z"}`,
		`{"schema_version":1,"run_id":"x"}`, `{"schema_version":1,"run_id":"x","created_at":"2026-11-30T12:00:00Z","outcomes":"nope"}`} {
		if _, err := reports.Parse([]byte(b)); !errors.Is(err, reports.ErrCorrupt) {
			t.Errorf("Parse(%q) = %v", b, err)
		}
	}
	if _, err := reports.Get(context.Background(), objstore.NewMem(clock.Real{}), "../../policy"); err == nil {
		t.Error("a run id with a path must be refused")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(report(t0, reports.Outcome{Host: "h", Unit: "u", Classification: reports.Planned, Detail: "\x1b[2J"}).Marshal())
	f.Add([]byte(`{"schema_version":1,"run_id":"x","created_at":"2026-11-30T12:00:00Z","summary":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := reports.Parse(b)
		if err != nil {
			return
		}
		var sb strings.Builder
		if err := reports.WriteRunText(&sb, r); err != nil {
			t.Fatal(err)
		}
		for _, c := range sb.String() {
			if c == 0x1b || c == 0x07 || c == 0x9b {
				t.Fatalf("rendered a raw control character from %q", b)
			}
		}
		_ = fmt.Sprint(r.BlockedCount())
	})
}
