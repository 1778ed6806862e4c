package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// FuzzParseRecord: whatever a stored lease object holds, ParseRecord must
// not panic or hang; it returns either an error wrapping ErrUnreadable and a
// zero Record, or a record with every field a take, a release and status
// rely on (schema 1, a subject, a token, a holder, both instants, expiry not
// before acquisition), and the manager's own check for an over-long term
// agrees with the one it applies. A record whose instants can be written
// back survives a round trip through the stored form unchanged. The
// committed corpus in testdata/fuzz/FuzzParseRecord holds valid and hostile
// leases.
func FuzzParseRecord(f *testing.F) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 500_000_000, time.UTC)
	f.Add(Record{SchemaVersion: 1, SubjectID: "service:web-1:api.service", DecisionID: "service-reconcile-x", Token: "4f0c",
		Holder: "service-reconciler", Owner: "ctl-1/4242/9c1e77aa", AcquiredAt: now, ExpiresAt: now.Add(6 * time.Minute)}.marshal())
	f.Add([]byte(`{"schema_version":1,"subject_id":"s","token":"t","holder":"h","acquired_at":"2026-11-30T12:00:00Z","expires_at":"2026-11-30T11:00:00Z"}`))
	m := &Manager{cfg: Config{MaxTTL: DefaultMaxTTL}}
	f.Fuzz(func(t *testing.T, b []byte) {
		timer := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("ParseRecord hung on %q", b)) })
		r, err := ParseRecord(b)
		timer.Stop()
		if err != nil {
			if !errors.Is(err, ErrUnreadable) || r != (Record{}) {
				t.Fatalf("ParseRecord = %+v, %v; want a zero record and ErrUnreadable", r, err)
			}
			return
		}
		if r.SchemaVersion != SchemaVersion || r.SubjectID == "" || r.Token == "" || r.Holder == "" ||
			r.AcquiredAt.IsZero() || r.ExpiresAt.IsZero() || r.ExpiresAt.Before(r.AcquiredAt) {
			t.Fatalf("accepted an incomplete lease: %+v", r)
		}
		_, perr := m.parse(b)
		if long := r.ExpiresAt.Sub(r.AcquiredAt) > DefaultMaxTTL; long != (perr != nil) {
			t.Fatalf("term %v: the manager's parse says %v", r.ExpiresAt.Sub(r.AcquiredAt), perr)
		}
		if y1, y2 := r.AcquiredAt.UTC().Year(), r.ExpiresAt.UTC().Year(); y1 < 0 || y1 > 9999 || y2 < 0 || y2 > 9999 {
			return // not writable as JSON; never written back (only minted records are)
		}
		again, err := ParseRecord(r.marshal())
		if err != nil {
			t.Fatalf("re-parsing the stored form of %+v: %v", r, err)
		}
		if again.SubjectID != r.SubjectID || again.Token != r.Token || again.Holder != r.Holder || again.Owner != r.Owner ||
			again.DecisionID != r.DecisionID || !again.AcquiredAt.Equal(r.AcquiredAt) || !again.ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("round trip changed the lease:\n%+v\n%+v", r, again)
		}
	})
}
