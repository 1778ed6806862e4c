package main

import (
	"testing"
	"time"
)

func TestScheduleInterval(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)
	for spec, want := range map[string]time.Duration{
		"@every 1s":    time.Second,
		"@every 1m":    time.Minute,
		"*/5 * * * *":  5 * time.Minute,
		"@hourly":      time.Hour,
		"0 3 * * *":    24 * time.Hour,
		"*/15 * * * *": 15 * time.Minute,
	} {
		s, err := cronParser.Parse(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if got := interval(s, now); got != want {
			t.Errorf("interval(%q) = %v, want %v", spec, got, want)
		}
	}
	for _, bad := range []string{"", "* * * *", "@every", "61 * * * *", "* * * * * *"} {
		if _, err := cronParser.Parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
