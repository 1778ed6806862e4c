package objstore

import (
	"sync"
	"time"

	"github.com/stado/stado/internal/clock"
)

// Defaults of the sampled store clock.
const (
	// dateResolution bounds how far the HTTP Date header may lag the server's
	// time when it wrote the response. Date is truncated to the second, and
	// servers built on fasthttp (Versity Gateway among them) refresh a cached
	// Date once a second, so the server's time lies within [Date, Date+2s).
	dateResolution = 2 * time.Second
	// clockDriftPPM bounds how fast the local monotonic clock may run against
	// the store's clock, in parts per million. NTP slews at most 500 ppm;
	// between two hosts that both follow NTP the rate difference is far
	// smaller, and the bound is applied in both directions.
	clockDriftPPM = 500
	// DefaultClockMaxAge is how long a sample is trusted before the store is
	// asked again.
	DefaultClockMaxAge = 10 * time.Minute
)

// sampledClock estimates a remote store's clock from the Date header of its
// responses plus the local monotonic time elapsed since each arrived.
//
// A response sent at local time s and received at r, carrying Date D, proves
// that at r the store's time lay in [D, D + dateResolution + (r-s)]: the header was
// written between s and r, and Date lags the server's time by less than
// dateResolution. The estimate
// keeps the intersection of every sample's interval, carried forward on the
// monotonic clock with a drift allowance, so it narrows as samples straddle
// second boundaries. An empty intersection means the store's clock was
// stepped; the estimate then restarts from the newest sample.
//
// The local wall clock is never read: only differences between local readings
// (which Go takes from the monotonic clock) enter the estimate.
type sampledClock struct {
	local  clock.Clock
	maxAge time.Duration

	mu       sync.Mutex
	have     bool
	at       time.Time // local reading the bounds below refer to
	earliest time.Time // store time at `at`, lower bound
	latest   time.Time // store time at `at`, upper bound
}

func newSampledClock(local clock.Clock, maxAge time.Duration) *sampledClock {
	if maxAge <= 0 {
		maxAge = DefaultClockMaxAge
	}
	return &sampledClock{local: local, maxAge: maxAge}
}

func drift(d time.Duration) time.Duration {
	if d < 0 {
		d = -d
	}
	return d / 1_000_000 * clockDriftPPM
}

// observe records one response: sent and received are local readings, date
// the parsed Date header.
func (c *sampledClock) observe(date, sent, received time.Time) {
	lo := date
	hi := date.Add(dateResolution + received.Sub(sent))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have && received.Sub(c.at) <= c.maxAge {
		el := received.Sub(c.at)
		plo := c.earliest.Add(el - drift(el))
		phi := c.latest.Add(el + drift(el))
		if plo.After(lo) {
			lo = plo
		}
		if phi.Before(hi) {
			hi = phi
		}
		if lo.After(hi) {
			// The store's clock moved against ours: trust the newest sample.
			lo, hi = date, date.Add(dateResolution+received.Sub(sent))
		}
	}
	c.have, c.at, c.earliest, c.latest = true, received, lo, hi
}

// read returns the store's time now, or false when there is no sample young
// enough to trust.
func (c *sampledClock) read() (TimeBounds, bool) {
	now := c.local.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.have {
		return TimeBounds{}, false
	}
	el := now.Sub(c.at)
	if el < 0 || el > c.maxAge {
		return TimeBounds{}, false
	}
	return TimeBounds{
		Earliest: c.earliest.Add(el - drift(el)),
		Latest:   c.latest.Add(el + drift(el)),
	}, true
}
