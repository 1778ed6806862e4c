package autonomy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

// FuzzLoadControl: whatever is stored as the control object, Load must not
// panic, hang or fail; a refused object is Invalid, reads as paused, and the
// gate refuses with the rewrite instruction; an accepted one survives a
// write and a re-read unchanged, and every breaker transition from it stays
// valid and writable. The committed corpus in testdata/fuzz/FuzzLoadControl
// holds hostile shapes; the seeds below are the valid ones.
func FuzzLoadControl(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte(withBreaker(`{"consecutive_failures": 4, "open_until": "2026-11-30T12:15:00.5+02:00", "cooldown_seconds": 900, "trips": 1, "last_error": "boom"}`)))
	f.Add([]byte(`{"schema_version":1,"emergency_paused":false,"reason":"","changed_at":"0001-01-01T00:00:00Z","changed_by":"","breaker":{"consecutive_failures":0,"open_until":null,"cooldown_seconds":0,"trips":0,"last_error":null},"write_id":"00"}`))
	pol := enforcing(f)
	set := breaker.SettingsFrom(pol.Policy)
	f.Fuzz(func(t *testing.T, data []byte) {
		timer := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Load hung on %q", truncate(data, 200))) })
		defer timer.Stop()
		ctx := context.Background()
		mem := objstore.NewMem(clock.NewFake(t0))
		if _, err := mem.Put(ctx, Key, data); err != nil {
			t.Fatal(err)
		}
		st, err := Load(ctx, mem)
		if err != nil {
			t.Fatalf("Load failed on a stored object: %v", err)
		}
		now := exact(t0)
		d := Decide(pol, st, now)
		if st.Invalid != nil {
			if !errors.Is(st.Invalid, ErrInvalidControl) || !st.Control.EmergencyPaused {
				t.Fatalf("Invalid %v, paused %v: want ErrInvalidControl and a fail-closed state", st.Invalid, st.Control.EmergencyPaused)
			}
			if d.Allowed || d.Reason != ReasonControlInvalid {
				t.Fatalf("the gate let an unreadable control state through: %+v", d)
			}
			return
		}
		c := st.Control
		body, err := c.marshal()
		if err != nil {
			t.Fatalf("an accepted state cannot be written back: %v", err)
		}
		again, err := Parse(body)
		if err != nil {
			t.Fatalf("the re-written state is refused: %v\n%s", err, body)
		}
		if body2, _ := again.marshal(); !bytes.Equal(body, body2) {
			t.Fatalf("a write and re-read changed the state:\n%s\n%s", body, body2)
		}
		if d.Allowed == (c.EmergencyPaused || c.Breaker.Phase(now) == breaker.Open) {
			t.Fatalf("decision %+v for paused=%v phase=%v", d, c.EmergencyPaused, c.Breaker.Phase(now))
		}
		for _, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(1000 * time.Hour)} {
			for _, next := range []breaker.State{
				c.Breaker.RecordFailure(set, at, "boom"),
				c.Breaker.RecordSuccess(set),
				c.Breaker.Reset(set),
			} {
				n := c
				n.Breaker = next
				if err := n.validate(); err != nil {
					t.Fatalf("a transition at %v led to an invalid state: %v", at, err)
				}
				if _, err := n.marshal(); err != nil {
					t.Fatalf("a transition at %v led to an unwritable state: %v", at, err)
				}
			}
		}
	})
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
