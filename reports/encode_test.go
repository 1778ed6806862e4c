package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// indented is the reference encoding: what Marshal must equal byte for byte.
func indented(t testing.TB, r *Report) []byte {
	t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

var hostile = []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\ncr\rbs\bff\f",
	"\x00\x01\x1b[2J\x7f", "caf\u00e9 \u2028 \u2029 \U0001F600", "bad \xff\xfe utf8 \xc3", "\u0085 \ufeff"}

func TestMarshalMatches(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	cases := []*Report{
		{SchemaVersion: 1, RunID: "r", CreatedAt: at},
		{SchemaVersion: 1, RunID: "r", CreatedAt: at, Summary: map[string]int{}, Outcomes: []Outcome{}},
		{SchemaVersion: 1, RunID: "r", CreatedAt: at, FinishedAt: at.Add(time.Second), DryRun: true, Paused: true,
			Summary: map[string]int{"services": 2, "healthy": 1, "reconciled": 1}},
	}
	r := &Report{SchemaVersion: 1, RunID: "2026-11-30T12-00-00.123456789Z", DecisionID: "d", CreatedAt: at, FinishedAt: at,
		Reconciler: "ctl-1/1/ab", Mode: "enforce-safe", PolicyVersion: "p", Breaker: "closed"}
	for i, s := range hostile {
		r.Outcomes = append(r.Outcomes, Outcome{Host: s, Service: s + "x", Unit: "u" + s, BeaconState: s, EndpointState: s,
			Classification: s, Action: s, Changed: i%2 == 0, Detail: s, DurationMS: int64(i*1000 - 3)})
	}
	r.Finalize()
	cases = append(cases, r)
	for i, c := range cases {
		if got, want := c.Marshal(), indented(t, c); !bytes.Equal(got, want) {
			t.Errorf("case %d: Marshal differs from MarshalIndent:\n%s\nwant:\n%s", i, got, want)
		}
	}
}

func FuzzMarshalMatches(f *testing.F) {
	for _, s := range hostile {
		f.Add(s, s, int64(7), true)
	}
	f.Fuzz(func(t *testing.T, a, b string, d int64, changed bool) {
		r := &Report{SchemaVersion: 1, RunID: a, DecisionID: b, Reconciler: a, Mode: b, Summary: map[string]int{a: 1, b: 2},
			Outcomes: []Outcome{{Host: a, Service: b, Unit: a, BeaconState: b, EndpointState: a, Classification: b, Action: a,
				Changed: changed, Detail: b, DurationMS: d}, {Host: b, Detail: a}}}
		if got, want := r.Marshal(), indented(t, r); !bytes.Equal(got, want) {
			t.Fatalf("Marshal differs from MarshalIndent:\n%q\nwant:\n%q", got, want)
		}
	})
}

func bigReport(n int) *Report {
	r := &Report{SchemaVersion: 1, RunID: "2026-11-30T12-00-00.123456789Z", DecisionID: "d", Reconciler: "ctl-1/1/ab",
		Mode: "enforce-safe", PolicyVersion: "p", Breaker: "closed"}
	for i := 0; i < n; i++ {
		o := Outcome{Host: fmt.Sprintf("h%05d", i/10), Service: fmt.Sprintf("s%06d", i), Unit: fmt.Sprintf("u%d.service", i%10),
			BeaconState: "active", Classification: Healthy}
		if i%100 == 0 {
			o.BeaconState, o.EndpointState, o.Classification, o.Action, o.Changed = "failed", "unreachable", Reconciled, "restart", true
			o.Detail, o.DurationMS = "restart ran in 3ms; http://127.0.0.1:8080/s000100 answered after 1ms (HTTP 200)", 12
		}
		r.Outcomes = append(r.Outcomes, o)
	}
	r.Finalize()
	return r
}

// BenchmarkMarshal100k is what saving the report of a 100,000-service tick
// costs to encode (it is written twice, from one encoding).
func BenchmarkMarshal100k(b *testing.B) {
	r := bigReport(100_000)
	b.ReportAllocs()
	for b.Loop() {
		b.SetBytes(int64(len(r.Marshal())))
	}
}

// BenchmarkMarshalIndent100k is the same report through encoding/json, the
// encoding Marshal reproduces.
func BenchmarkMarshalIndent100k(b *testing.B) {
	r := bigReport(100_000)
	b.ReportAllocs()
	for b.Loop() {
		out, _ := json.MarshalIndent(r, "", "  ")
		b.SetBytes(int64(len(out)))
	}
}
