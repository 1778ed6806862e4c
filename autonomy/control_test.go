package autonomy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stado/stado/breaker"
	"github.com/stado/stado/objstore"
)

var set = breaker.Settings{Failures: 3, Cooldown: 900 * time.Second, MaxCooldown: 14400 * time.Second}

func TestLoadMissingIsTheZeroState(t *testing.T) {
	s, _ := newMem()
	st := mustLoad(t, s)
	if st.Exists || st.Invalid != nil || st.Version != "" {
		t.Fatalf("Stored = %+v, want absent and valid", st)
	}
	if st.Control.EmergencyPaused || st.Control.Breaker.OpenUntil != nil || st.Control.Breaker.ConsecutiveFailures != 0 {
		t.Fatalf("Control = %+v, want not paused and the breaker closed", st.Control)
	}
	if d := Decide(enforcing(t), st, exact(t0)); !d.Allowed || d.NeedsTrial {
		t.Fatalf("a fresh fleet under an enforcing policy: %+v, want allowed", d)
	}
}

func TestLoadWrapsStoreErrors(t *testing.T) {
	s, _ := newMem()
	_, err := Load(context.Background(), &faultStore{Store: s, getErr: fmt.Errorf("boom: %w", objstore.ErrDenied)})
	if !errors.Is(err, objstore.ErrDenied) || !strings.Contains(err.Error(), "read the control state") {
		t.Fatalf("Load = %v, want the store's error wrapped", err)
	}
}

// valid is a control object as DESIGN §7 shows it (no write_id: written by
// hand or restored from a backup).
const valid = `{"schema_version": 1, "emergency_paused": true, "reason": "db migration",
 "changed_at": "2026-11-30T12:00:00.5Z", "changed_by": "alice@ops-1",
 "breaker": {"consecutive_failures": 0, "open_until": null, "cooldown_seconds": 900,
             "trips": 0, "last_error": null}}`

// withBreaker is a valid object whose breaker is the given JSON.
func withBreaker(b string) string {
	return `{"schema_version": 1, "emergency_paused": false, "reason": "", "changed_at": "2026-11-30T12:00:00Z", "changed_by": "x", "breaker": ` + b + `}`
}

// TestHostileControlObjects: whatever is stored, Load never panics or
// errors; anything that is not a valid control state is Invalid, fails closed
// (paused even for a caller that ignores Invalid), and the gate refuses with
// a sentence saying how to rewrite it.
func TestHostileControlObjects(t *testing.T) {
	deep := `{"reason": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	for _, tc := range []struct {
		name string
		body string
		ok   bool
	}{
		{"design example", valid, true},
		{"control characters in the reason are data, not a defect", strings.Replace(valid, "db migration", `\u001b[2J\u0007\u009bevil\r`, 1), true},
		{"open breaker", withBreaker(`{"consecutive_failures": 4, "open_until": "2026-11-30T12:15:00Z", "cooldown_seconds": 900, "trips": 1, "last_error": "boom"}`), true},
		{"empty", ``, false},
		{"garbage", `garbage`, false},
		{"binary", "\x00\x01\xff\xfe", false},
		{"truncated", valid[:len(valid)/2], false},
		{"null", `null`, false},
		{"array", `[]`, false},
		{"number", `42`, false},
		{"string", `"paused"`, false},
		{"two objects", valid + valid, false},
		{"trailing garbage", valid + ` x`, false},
		{"unknown key", strings.Replace(valid, `"reason"`, `"reason": "", "pause_everything"`, 1), false},
		{"key in another case", strings.Replace(valid, `"emergency_paused": true`, `"Emergency_Paused": true`, 1), false},
		{"duplicate key", strings.Replace(valid, `"emergency_paused": true`, `"emergency_paused": true, "emergency_paused": false`, 1), false},
		{"unknown breaker key", withBreaker(`{"consecutive_failures": 0, "half_open": true}`), false},
		{"duplicate breaker key", withBreaker(`{"trips": 0, "trips": 1}`), false},
		{"wrong type: bool as string", strings.Replace(valid, `"emergency_paused": true`, `"emergency_paused": "yes"`, 1), false},
		{"wrong type: breaker as array", withBreaker(`[]`), false},
		{"wrong type: count as string", withBreaker(`{"consecutive_failures": "4"}`), false},
		{"wrong type: fractional count", withBreaker(`{"consecutive_failures": 1.5}`), false},
		{"wrong type: open_until as number", withBreaker(`{"open_until": 5}`), false},
		{"not a time", withBreaker(`{"open_until": "soon"}`), false},
		{"year 10000", withBreaker(`{"open_until": "10000-01-01T00:00:00Z"}`), false},
		{"year 0 once in UTC", strings.Replace(valid, "2026-11-30T12:00:00.5Z", "0000-01-01T00:00:00+01:00", 1), false},
		{"zero open_until", withBreaker(`{"open_until": "0001-01-01T00:00:00Z"}`), false},
		{"huge number", withBreaker(`{"consecutive_failures": 1e400}`), false},
		{"beyond int64", withBreaker(`{"consecutive_failures": 99999999999999999999}`), false},
		{"int64 max count", withBreaker(`{"consecutive_failures": 9223372036854775807}`), false},
		{"int64 max cooldown", withBreaker(`{"cooldown_seconds": 9223372036854775807}`), false},
		{"negative count", withBreaker(`{"consecutive_failures": -1}`), false},
		{"negative trips", withBreaker(`{"trips": -3}`), false},
		{"cooldown above the policy bound", withBreaker(`{"cooldown_seconds": 604801}`), false},
		{"schema version 2", strings.Replace(valid, `"schema_version": 1`, `"schema_version": 2`, 1), false},
		{"no schema version", strings.Replace(valid, `"schema_version": 1,`, ``, 1), false},
		{"reason too long", strings.Replace(valid, "db migration", strings.Repeat("r", MaxReasonLen+1), 1), false},
		{"actor too long", strings.Replace(valid, "alice@ops-1", strings.Repeat("a", MaxActorLen+1), 1), false},
		{"last error too long", withBreaker(`{"last_error": "` + strings.Repeat("e", breaker.MaxErrorLen+1) + `"}`), false},
		{"too large", valid + strings.Repeat(" ", MaxSize), false},
		{"deeply nested", deep, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newMem()
			putControl(t, s, tc.body)
			st := mustLoad(t, s)
			if !st.Exists || st.Version == "" {
				t.Fatalf("Stored = %+v, want the stored object's version", st)
			}
			d := Decide(enforcing(t), st, exact(t0))
			if tc.ok {
				if st.Invalid != nil {
					t.Fatalf("Invalid = %v, want a valid control state", st.Invalid)
				}
				return
			}
			if st.Invalid == nil || !errors.Is(st.Invalid, ErrInvalidControl) {
				t.Fatalf("Invalid = %v, want an error wrapping ErrInvalidControl", st.Invalid)
			}
			if !st.Control.EmergencyPaused {
				t.Error("an unreadable control state must read as paused (fail closed)")
			}
			if d.Allowed || d.Reason != ReasonControlInvalid || d.Detail("restart") != DetailControlInvalid {
				t.Fatalf("decision %+v, want refused as control-invalid", d)
			}
			for _, want := range []string{Key, "is unreadable", "`stado optimize pause REASON`", "`stado optimize resume`"} {
				if !strings.Contains(d.Explanation, want) {
					t.Errorf("explanation %q does not contain %q", d.Explanation, want)
				}
			}
			if strings.ContainsAny(d.Explanation, "\x00\x1b\x07\r") {
				t.Errorf("explanation carries raw control characters: %q", d.Explanation)
			}
		})
	}
}

// faultStore wraps a store: getErr fails every Get; onWrite decides each
// conditional write (1-based n), given the function that performs it.
type faultStore struct {
	objstore.Store
	getErr  error
	onWrite func(n int, do func() (string, error)) (string, error)

	mu     sync.Mutex
	writes int
}

func (f *faultStore) Get(ctx context.Context, key string) (objstore.Object, error) {
	if f.getErr != nil {
		return objstore.Object{}, f.getErr
	}
	return f.Store.Get(ctx, key)
}

func (f *faultStore) write(do func() (string, error)) (string, error) {
	f.mu.Lock()
	f.writes++
	n := f.writes
	f.mu.Unlock()
	if f.onWrite == nil {
		return do()
	}
	return f.onWrite(n, do)
}

func (f *faultStore) Create(ctx context.Context, key string, body []byte) (string, error) {
	return f.write(func() (string, error) { return f.Store.Create(ctx, key, body) })
}

func (f *faultStore) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	return f.write(func() (string, error) { return f.Store.PutIfMatch(ctx, key, body, etag) })
}

var (
	errLost = fmt.Errorf("store put-if-match %s: %w: connection reset", Key, objstore.ErrUnavailable)
	err412  = fmt.Errorf("store put-if-match %s: %w", Key, objstore.ErrPrecondition)
)

// TestAmbiguousWrites: a write whose answer is lost is decided by reading
// back, so a failure is counted exactly once whether or not it landed.
func TestAmbiguousWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing bool // a control object exists, so the write is a put-if-match
		// first answers the first write.
		first func(do func() (string, error)) (string, error)
	}{
		{"create committed, answer lost", false, func(do func() (string, error)) (string, error) { _, _ = do(); return "", errLost }},
		{"put committed, answer lost", true, func(do func() (string, error)) (string, error) { _, _ = do(); return "", errLost }},
		{"put committed, SDK retry answered 412", true, func(do func() (string, error)) (string, error) { _, _ = do(); return "", err412 }},
		{"create committed, SDK retry answered 412", false, func(do func() (string, error)) (string, error) { _, _ = do(); return "", err412 }},
		{"put not sent, store unavailable", true, func(func() (string, error)) (string, error) { return "", errLost }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem, _ := newMem()
			if tc.existing {
				if _, err := RecordRepair(ctx, mem, set, false, "first"); err != nil {
					t.Fatal(err)
				}
			}
			fs := &faultStore{Store: mem, onWrite: func(n int, do func() (string, error)) (string, error) {
				if n == 1 {
					return tc.first(do)
				}
				return do()
			}}
			br, err := RecordRepair(ctx, fs, set, false, "second")
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			if tc.existing {
				want = 2
			}
			if br.ConsecutiveFailures != want {
				t.Fatalf("returned breaker has %d failures, want %d", br.ConsecutiveFailures, want)
			}
			if got := mustLoad(t, mem).Control.Breaker.ConsecutiveFailures; got != want {
				t.Fatalf("stored breaker has %d failures, want %d: the ambiguous write was counted %s", got, want,
					map[bool]string{true: "twice", false: "not at all"}[got > want])
			}
		})
	}
}

// TestUpdateRetriesOnConflict: another writer commits between this update's
// read and its write; the update re-reads and re-applies, and both count.
func TestUpdateRetriesOnConflict(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMem()
	fs := &faultStore{Store: mem}
	fs.onWrite = func(n int, do func() (string, error)) (string, error) {
		if n == 1 {
			if _, err := RecordRepair(ctx, mem, set, false, "the other writer"); err != nil {
				t.Error(err)
			}
		}
		return do()
	}
	if _, err := RecordRepair(ctx, fs, set, false, "this writer"); err != nil {
		t.Fatal(err)
	}
	st := mustLoad(t, mem)
	if st.Control.Breaker.ConsecutiveFailures != 2 || fs.writes != 2 {
		t.Fatalf("%d failures after %d writes, want 2 failures after a conflict and a retry", st.Control.Breaker.ConsecutiveFailures, fs.writes)
	}
	if *st.Control.Breaker.LastError != "this writer" {
		t.Errorf("last_error %q, want the retried update's", *st.Control.Breaker.LastError)
	}
}

// TestUpdateGivesUpAfterBoundedAttempts: a store that refuses every
// conditional write makes Update stop with ErrContention after its bounded
// attempts, saying to try again.
func TestUpdateGivesUpAfterBoundedAttempts(t *testing.T) {
	mem, _ := newMem()
	fs := &faultStore{Store: mem, onWrite: func(int, func() (string, error)) (string, error) { return "", err412 }}
	_, err := Pause(context.Background(), fs, "maintenance", "alice")
	if !errors.Is(err, ErrContention) || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("Pause = %v, want ErrContention saying to try again", err)
	}
	if fs.writes != retryAttempts {
		t.Errorf("%d writes attempted, want %d", fs.writes, retryAttempts)
	}
}

func TestUpdateStopsOnOtherStoreErrors(t *testing.T) {
	mem, _ := newMem()
	denied := fmt.Errorf("store create %s: %w", Key, objstore.ErrDenied)
	fs := &faultStore{Store: mem, onWrite: func(int, func() (string, error)) (string, error) { return "", denied }}
	_, err := Pause(context.Background(), fs, "maintenance", "alice")
	if !errors.Is(err, objstore.ErrDenied) || fs.writes != 1 {
		t.Fatalf("Pause = %v after %d writes, want ErrDenied after one", err, fs.writes)
	}
}

// TestNoChangeWritesNothing: an update that changes nothing costs one read
// and no write.
func TestNoChangeWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(s objstore.Store)
		op    func(s objstore.Store) error
	}{
		{"success on a fresh fleet", func(objstore.Store) {},
			func(s objstore.Store) error { _, err := RecordRepair(ctx, s, set, true, ""); return err }},
		{"success on a closed breaker", func(s objstore.Store) {
			_, _ = RecordRepair(ctx, s, set, false, "x")
			_, _ = RecordRepair(ctx, s, set, true, "")
		}, func(s objstore.Store) error { _, err := RecordRepair(ctx, s, set, true, ""); return err }},
		{"resume when not paused", func(objstore.Store) {},
			func(s objstore.Store) error { _, err := Resume(ctx, s, "bob"); return err }},
		{"pause again with the same reason", func(s objstore.Store) { _, _ = Pause(ctx, s, "db", "alice") },
			func(s objstore.Store) error { _, err := Pause(ctx, s, "db", "bob"); return err }},
		{"reset of a reset breaker", func(objstore.Store) {},
			func(s objstore.Store) error { _, err := ResetBreaker(ctx, s, set, "bob"); return err }},
		{"Update whose fn changes nothing", func(objstore.Store) {},
			func(s objstore.Store) error {
				_, err := Update(ctx, s, func(*Control) (bool, error) { return false, nil })
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, _ := newMem()
			tc.setup(mem)
			before := mustLoad(t, mem)
			c := objstore.NewCounting(mem)
			if err := tc.op(c); err != nil {
				t.Fatal(err)
			}
			if got := c.Counts(); !reflect.DeepEqual(got, map[string]int64{"get": 1}) {
				t.Fatalf("requests %v, want one get", got)
			}
			if after := mustLoad(t, mem); after.Version != before.Version {
				t.Fatal("the stored version changed")
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	ctx := context.Background()
	mem, clk := newMem()

	o, err := Pause(ctx, mem, "db migration", "alice@ops-1")
	if err != nil {
		t.Fatal(err)
	}
	c := o.After.Control
	if !o.Changed || o.Before.Exists || !c.EmergencyPaused || c.Reason != "db migration" || c.ChangedBy != "alice@ops-1" || !c.ChangedAt.Equal(t0) {
		t.Fatalf("after pause: %+v, %+v", o, c)
	}
	if st := mustLoad(t, mem); st.Version != o.After.Version || st.Control.Reason != "db migration" {
		t.Fatalf("stored %+v, want the pause as returned", st)
	}

	clk.Advance(time.Minute)
	o, err = Pause(ctx, mem, "db migration, part 2", "bob")
	if err != nil || !o.Changed || o.After.Control.Reason != "db migration, part 2" || o.After.Control.ChangedBy != "bob" {
		t.Fatalf("re-pause with another reason: %v, %+v", err, o)
	}

	clk.Advance(time.Minute)
	o, err = Resume(ctx, mem, "carol")
	c = o.After.Control
	if err != nil || !o.Changed || c.EmergencyPaused || c.Reason != "" || c.ChangedBy != "carol" || !c.ChangedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("resume: %v, %+v", err, c)
	}
	if !o.Before.Control.EmergencyPaused || o.Before.Control.Reason != "db migration, part 2" {
		t.Errorf("Before = %+v, want the paused state resumed from", o.Before.Control)
	}

	for _, tc := range []struct {
		reason, actor string
		want          error
	}{
		{"", "alice", ErrInvalidReason},
		{" \t", "alice", ErrInvalidReason},
		{strings.Repeat("r", MaxReasonLen+1), "alice", ErrInvalidReason},
		{"ok", "", ErrInvalidActor},
		{"ok", strings.Repeat("a", MaxActorLen+1), ErrInvalidActor},
	} {
		if _, err := Pause(ctx, mem, tc.reason, tc.actor); !errors.Is(err, tc.want) {
			t.Errorf("Pause(%.10q, %.10q) = %v, want %v", tc.reason, tc.actor, err, tc.want)
		}
	}
}

// TestEveryWriteIsUnique: the same logical state written twice at the same
// store instant is two versions (ETags are content hashes: ABA).
func TestEveryWriteIsUnique(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMem()
	first, err := Pause(ctx, mem, "x", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resume(ctx, mem, "alice"); err != nil {
		t.Fatal(err)
	}
	again, err := Pause(ctx, mem, "x", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if first.After.Version == again.After.Version {
		t.Fatal("two writes of the same state at the same instant have one version")
	}
}

func TestResetBreaker(t *testing.T) {
	ctx := context.Background()
	mem, clk := newMem()
	if _, err := Pause(ctx, mem, "db", "alice"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < set.Failures; i++ {
		if _, err := RecordRepair(ctx, mem, set, false, "boom"); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	o, err := ResetBreaker(ctx, mem, set, "bob")
	if err != nil {
		t.Fatal(err)
	}
	c := o.After.Control
	if !o.Changed || o.Before.Control.Breaker.OpenUntil == nil {
		t.Fatalf("reset: %+v, want a change from an open breaker", o)
	}
	if !c.Breaker.Equal(breaker.State{CooldownSeconds: 900}) {
		t.Errorf("breaker after reset %+v, want closed with no history", c.Breaker)
	}
	if !c.EmergencyPaused || c.Reason != "db" || c.ChangedBy != "bob" || !c.ChangedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("after reset %+v: the pause must stay, with the reset recorded as the last change", c)
	}
}

// TestRepairsKeepTheOperatorsAttribution: the reconciler's breaker writes do
// not overwrite who last changed the control state, except to record that a
// reconciler created it.
func TestRepairsKeepTheOperatorsAttribution(t *testing.T) {
	ctx := context.Background()
	mem, clk := newMem()
	if _, err := RecordRepair(ctx, mem, set, false, "boom"); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, mem).Control; c.ChangedBy != ReconcilerActor || !c.ChangedAt.Equal(t0) {
		t.Fatalf("created by a repair: changed_by %q at %v", c.ChangedBy, c.ChangedAt)
	}
	clk.Advance(time.Minute)
	if _, err := Pause(ctx, mem, "db", "alice"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := RecordRepair(ctx, mem, set, false, "boom"); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, mem).Control; c.ChangedBy != "alice" || !c.ChangedAt.Equal(t0.Add(time.Minute)) || c.Breaker.ConsecutiveFailures != 2 {
		t.Fatalf("after a repair: %+v, want alice's pause attribution kept and 2 failures", c)
	}
}

// TestUnreadableControlIsRewrittenOnlyByPauseOrResume: a breaker reset or a
// repair outcome refuses an unreadable control object and leaves it; pause
// and resume rewrite it whole and say so.
func TestUnreadableControlIsRewrittenOnlyByPauseOrResume(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMem()
	putControl(t, mem, "{garbage")
	garbage := mustLoad(t, mem).Version

	if _, err := ResetBreaker(ctx, mem, set, "bob"); !errors.Is(err, ErrControlUnreadable) || !strings.Contains(err.Error(), "stado optimize resume") {
		t.Errorf("ResetBreaker = %v, want ErrControlUnreadable naming the fix", err)
	}
	if _, err := RecordRepair(ctx, mem, set, false, "boom"); !errors.Is(err, ErrControlUnreadable) {
		t.Errorf("RecordRepair = %v, want ErrControlUnreadable", err)
	}
	if _, err := Update(ctx, mem, func(*Control) (bool, error) { t.Error("fn called on an unreadable state"); return true, nil }); !errors.Is(err, ErrControlUnreadable) {
		t.Errorf("Update = %v, want ErrControlUnreadable", err)
	}
	if v := mustLoad(t, mem).Version; v != garbage {
		t.Fatal("a refused update changed the stored object")
	}

	for _, op := range []struct {
		name   string
		do     func() (*Outcome, error)
		paused bool
	}{
		{"pause", func() (*Outcome, error) { return Pause(ctx, mem, "fixing", "alice") }, true},
		{"resume", func() (*Outcome, error) { return Resume(ctx, mem, "alice") }, false},
	} {
		putControl(t, mem, `{"schema_version": 1, "breaker": {"trips": -1}}`)
		o, err := op.do()
		if err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if !o.Changed || !errors.Is(o.Replaced, ErrInvalidControl) {
			t.Errorf("%s: Changed %v, Replaced %v; want the unreadable object reported as replaced", op.name, o.Changed, o.Replaced)
		}
		st := mustLoad(t, mem)
		if st.Invalid != nil || st.Control.EmergencyPaused != op.paused || !st.Control.Breaker.Equal(breaker.State{}) ||
			st.Control.ChangedBy != "alice" || !st.Control.ChangedAt.Equal(t0) {
			t.Errorf("%s: stored %+v (invalid %v), want a valid state, paused=%v, breaker closed, rewritten by alice at t0",
				op.name, st.Control, st.Invalid, op.paused)
		}
	}
}

// TestStoredShape: the object holds exactly the keys of DESIGN §7 plus
// write_id, with null open_until and last_error while closed.
func TestStoredShape(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMem()
	if _, err := Pause(ctx, mem, "db", "alice"); err != nil {
		t.Fatal(err)
	}
	obj, err := mem.Get(ctx, Key)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj.Body, &m); err != nil {
		t.Fatal(err)
	}
	var b map[string]json.RawMessage
	if err := json.Unmarshal(m["breaker"], &b); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(m), []string{"breaker", "changed_at", "changed_by", "emergency_paused", "reason", "schema_version", "write_id"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if got, want := keys(b), []string{"consecutive_failures", "cooldown_seconds", "last_error", "open_until", "trips"}; !reflect.DeepEqual(got, want) {
		t.Errorf("breaker keys %v, want %v", got, want)
	}
	if string(b["open_until"]) != "null" || string(b["last_error"]) != "null" || string(m["changed_at"]) != `"2026-11-30T12:00:00Z"` {
		t.Errorf("open_until %s, last_error %s, changed_at %s", b["open_until"], b["last_error"], m["changed_at"])
	}
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestChangeTimeIsMonotonic: a change stamped by a process whose estimate of
// the store's clock lags the previous writer's still reads as later; a
// stamp far in the future does not pin later ones.
func TestChangeTimeIsMonotonic(t *testing.T) {
	for _, tc := range []struct {
		name string
		prev time.Time
		want time.Time
	}{
		{"no previous change", time.Time{}, t0},
		{"previous change earlier", t0.Add(-time.Second), t0},
		{"previous change at the same instant", t0, t0.Add(time.Nanosecond)},
		{"previous writer's clock ran ahead by a second", t0.Add(time.Second), t0.Add(time.Second + time.Nanosecond)},
		{"previous stamp far in the future", t0.Add(time.Hour), t0},
	} {
		if got := changeTime(tc.prev, exact(t0)); !got.Equal(tc.want) {
			t.Errorf("%s: changeTime = %v, want %v", tc.name, got, tc.want)
		}
	}
}
