// Package stats summarises repeated measurements: the median and the spread
// (minimum and maximum) that every figure in docs/benchmarks.md carries, and
// percentiles of latency samples.
package stats

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary is a median with its spread over repeated runs.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize returns the median, minimum and maximum of xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Summary{N: len(s), Median: Quantile(s, 0.5), Min: s[0], Max: s[len(s)-1]}
}

// Quantile returns the q-quantile of sorted xs, interpolating linearly
// between the closest ranks (q=0.5 is the usual median).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return sorted[lo]
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// DurationQuantiles returns the given quantiles of ds, in seconds.
func DurationQuantiles(ds []time.Duration, qs ...float64) []float64 {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	slices.Sort(s)
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = Quantile(s, q)
	}
	return out
}

// Format renders a summary as "median (min–max)" with f formatting each
// number.
func (s Summary) Format(f func(float64) string) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmt.Sprintf("%s (n=%d)", f(s.Median), s.N)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}
