package stats

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 3, 2, 4})
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 {
		t.Fatalf("%+v", s)
	}
	if s := Summarize([]float64{1, 2, 3, 4}); s.Median != 2.5 {
		t.Fatalf("even count: median %v", s.Median)
	}
	if got := s.Format(func(v float64) string { return time.Duration(v * float64(time.Second)).String() }); got != "3s (1s–5s)" {
		t.Fatalf("Format = %q", got)
	}
	if got := Summarize(nil).Format(nil); got != "–" {
		t.Fatalf("empty: %q", got)
	}
}

func TestDurationQuantiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	q := DurationQuantiles(ds, 0.5, 0.99)
	if q[0] != 0.0505 || q[1] < 0.099 || q[1] > 0.1 {
		t.Fatalf("quantiles %v", q)
	}
}
