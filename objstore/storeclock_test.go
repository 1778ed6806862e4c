package objstore

import (
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
)

func TestSampledClock(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	local := clock.NewFake(t0.Add(-5 * time.Hour)) // the local wall clock is far off
	c := newSampledClock(local, time.Minute)
	if _, ok := c.read(); ok {
		t.Fatal("a clock with no sample answered")
	}
	// True server time = t0 + 300ms at the first response; Date truncates.
	server := t0.Add(300 * time.Millisecond)
	sent := local.Now()
	local.Advance(20 * time.Millisecond)
	server = server.Add(20 * time.Millisecond)
	c.observe(server.Truncate(time.Second), sent, local.Now())
	check := func(what string) {
		t.Helper()
		b, ok := c.read()
		if !ok {
			t.Fatalf("%s: no reading", what)
		}
		if server.Before(b.Earliest) || server.After(b.Latest) {
			t.Fatalf("%s: true time %v outside [%v, %v]", what, server, b.Earliest, b.Latest)
		}
	}
	check("first sample")
	b1, _ := c.read()
	if b1.Uncertainty() > dateResolution+20*time.Millisecond {
		t.Fatalf("first sample uncertainty %v", b1.Uncertainty())
	}
	// Samples on both sides of a second boundary narrow the interval.
	for i := 0; i < 8; i++ {
		local.Advance(170 * time.Millisecond)
		server = server.Add(170 * time.Millisecond)
		sent := local.Now()
		local.Advance(5 * time.Millisecond)
		server = server.Add(5 * time.Millisecond)
		c.observe(server.Truncate(time.Second), sent, local.Now())
		check("narrowing")
	}
	b2, _ := c.read()
	if b2.Uncertainty() > b1.Uncertainty()-500*time.Millisecond {
		t.Fatalf("uncertainty did not narrow: %v then %v", b1.Uncertainty(), b2.Uncertainty())
	}
	// Elapsed local time carries the estimate forward.
	local.Advance(30 * time.Second)
	server = server.Add(30 * time.Second)
	check("30s later")
	// The server's clock is stepped back an hour: the estimate restarts.
	server = server.Add(-time.Hour)
	sent = local.Now()
	local.Advance(time.Millisecond)
	server = server.Add(time.Millisecond)
	c.observe(server.Truncate(time.Second), sent, local.Now())
	check("after a step")
	// Too old a sample is not trusted.
	local.Advance(2 * time.Minute)
	if _, ok := c.read(); ok {
		t.Fatal("a sample older than maxAge was trusted")
	}
}
