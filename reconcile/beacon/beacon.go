// Package beacon owns a host's health beacon (DESIGN §8): the JSON object at
// state/beacons/<host>.json in which a host reports the states of its units,
// how it is published (Publish, with unit states from systemd, from --state
// flags or from a file an agent wrote), and how the reconciler reads it back
// (Read, ReadAll) and judges whether it is still evidence (Freshness).
//
// A beacon is written by a host and read by every reconciler, so the read
// side treats it as hostile input: every field is validated, sizes are
// bounded, and a beacon that is corrupt, oversized, from another host or
// dated in the future is an error value for that host alone (its services
// are then unknown, never repaired), never a panic and never a guess.
//
// A unit that does not exist on the host (systemd's LoadState=not-found) is
// left out of the beacon: "absent from a fresh beacon" is exactly how DESIGN
// §8 describes it, and it counts as down.
package beacon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reconcile/registry"
)

// SchemaVersion is the beacon schema this package writes and reads.
const SchemaVersion = 1

// Prefix is where beacons are stored: Prefix + host + ".json".
const Prefix = "state/beacons/"

// Limits.
const (
	// MaxUnits is the most units one beacon may report.
	MaxUnits = 10_000
	// MaxSize is the largest beacon read or written, in bytes.
	MaxSize = 4 << 20
	// MaxFutureSkew is how far past the reader's store clock a beacon's
	// reported_at may lie. reported_at is minted on the store clock, so a
	// beacon that is truly from the future means a broken clock, a bug or
	// a forgery; trusting it would keep it "fresh" for longer than the
	// policy's silence allows.
	MaxFutureSkew = 5 * time.Second
	// maxWordLen bounds an active or sub state word.
	maxWordLen = 64
)

// TimeFormat is how reported_at is written: RFC 3339 in UTC with all nine
// digits of nanoseconds, so that every write's content is unique.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Sentinel errors.
var (
	// ErrNoBeacon: the host has published no beacon.
	ErrNoBeacon = errors.New("no beacon")
	// ErrInvalid: the beacon (or a publish's input) breaks the schema.
	ErrInvalid = errors.New("invalid beacon")
	// ErrStale: the beacon is older than the silence allowed.
	ErrStale = errors.New("beacon is stale")
	// ErrFromFuture: reported_at lies past the store clock.
	ErrFromFuture = errors.New("beacon is dated in the future")
	// ErrUnknownState: a state word outside States.
	ErrUnknownState = errors.New("unknown unit state")
)

// State is a unit's ActiveState as systemd words it.
type State string

// The states of DESIGN §9 (`beacon publish --state`).
const (
	Active       State = "active"
	Failed       State = "failed"
	Inactive     State = "inactive"
	Activating   State = "activating"
	Deactivating State = "deactivating"
	Reloading    State = "reloading"
)

// States lists the states an operator or agent may report, in the order
// messages list them.
var States = []State{Active, Failed, Inactive, Activating, Deactivating, Reloading}

// Class is what a state means to the reconciler.
type Class string

// The classes.
const (
	// ClassUp: the unit is active.
	ClassUp Class = "up"
	// ClassTransitional: activating, deactivating or reloading; not this
	// tick.
	ClassTransitional Class = "transitional"
	// ClassDown: failed or inactive (and, by DESIGN §8, a unit absent from a
	// fresh beacon, which has no State at all).
	ClassDown Class = "down"
	// ClassUnknown: a state systemd may report that is none of States
	// (maintenance, refreshing, or one added later). Never repaired.
	ClassUnknown Class = "unknown"
)

// Class says what the state means to the reconciler.
func (s State) Class() Class {
	switch s {
	case Active:
		return ClassUp
	case Activating, Deactivating, Reloading:
		return ClassTransitional
	case Failed, Inactive:
		return ClassDown
	}
	return ClassUnknown
}

// ParseState accepts exactly the words of States.
func ParseState(s string) (State, error) {
	if slices.Contains(States, State(s)) {
		return State(s), nil
	}
	return "", fmt.Errorf("%w %s; use one of: %s", ErrUnknownState, quote(s), joinStates())
}

func joinStates() string {
	s := make([]string, len(States))
	for i, st := range States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// Unit is one unit's state in a beacon.
type Unit struct {
	Unit        string `json:"unit"`
	ActiveState State  `json:"active_state"`
	// SubState is systemd's SubState ("running", "dead", "auto-restart");
	// "" when the reporter did not give one.
	SubState string `json:"sub_state"`
}

// Beacon is a host's report of its unit states, valid as read or written.
type Beacon struct {
	Host string
	// ReportedAt is when it was published, on the store's clock.
	ReportedAt time.Time
	// Units sorted by name, each once (Unit relies on the order).
	Units []Unit
}

// wire is the JSON shape, field order as in DESIGN §8.
type wire struct {
	SchemaVersion int    `json:"schema_version"`
	Host          string `json:"host"`
	ReportedAt    string `json:"reported_at"`
	Units         []Unit `json:"units"`
}

// Key returns where host's beacon is stored, or an error when host is not
// a valid host name (so no key can escape state/beacons/).
func Key(host string) (string, error) {
	if err := registry.CheckHost(host); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Prefix + host + ".json", nil
}

// Unit returns the state reported for unit, if the beacon reports it. It
// only reads the beacon, so many goroutines may ask at once.
func (b *Beacon) Unit(unit string) (Unit, bool) {
	i, ok := slices.BinarySearchFunc(b.Units, unit, func(u Unit, name string) int { return strings.Compare(u.Unit, name) })
	if !ok {
		return Unit{}, false
	}
	return b.Units[i], true
}

// Freshness says whether the beacon is still evidence at now, given the
// policy's beacon silence: nil when it is; an error wrapping ErrStale or
// ErrFromFuture, with a sentence for operators, when it is not.
//
// The judgement is conservative on both sides of the clock's uncertainty:
// a beacon is fresh only if it is younger than silence even at the latest
// instant now may be, and one dated more than MaxFutureSkew past that
// instant is not trusted at all.
func (b *Beacon) Freshness(now objstore.TimeBounds, silence time.Duration) error {
	if ahead := b.ReportedAt.Sub(now.Latest); ahead > MaxFutureSkew {
		return fmt.Errorf("%w: the beacon of %s is dated %s, %s ahead of the store clock; "+
			"it is not used as evidence: check the clock of the store and of whatever wrote it, then republish",
			ErrFromFuture, b.Host, b.ReportedAt.UTC().Format(TimeFormat), ahead.Round(time.Second))
	}
	if !b.ReportedAt.Add(silence).After(now.Latest) {
		return fmt.Errorf("%w: the beacon of %s was reported at %s, %s ago, longer than the beacon silence of %s; "+
			"its units are unknown until `stado beacon publish --host %s` runs there again",
			ErrStale, b.Host, b.ReportedAt.UTC().Format(TimeFormat), now.Latest.Sub(b.ReportedAt).Round(time.Second), silence, b.Host)
	}
	return nil
}

// Fresh reports whether Freshness finds the beacon still evidence.
func (b *Beacon) Fresh(now objstore.TimeBounds, silence time.Duration) bool {
	return b.Freshness(now, silence) == nil
}

// Age is how long ago the beacon was reported, by the earliest reading of
// now (negative for a beacon dated in the future).
func (b *Beacon) Age(now objstore.TimeBounds) time.Duration { return now.Earliest.Sub(b.ReportedAt) }

// Encode renders the beacon as stored.
func (b *Beacon) Encode() ([]byte, error) {
	units := b.Units
	if units == nil {
		units = []Unit{}
	}
	return json.Marshal(wire{SchemaVersion: SchemaVersion, Host: b.Host, ReportedAt: b.ReportedAt.UTC().Format(TimeFormat), Units: units})
}

// Decode parses and validates a stored beacon that must belong to host.
// Whatever data holds, it returns a valid beacon or an error wrapping
// ErrInvalid; it never panics.
func Decode(data []byte, host string) (*Beacon, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: it is %d bytes, more than the %d allowed", ErrInvalid, len(data), MaxSize)
	}
	var w struct {
		SchemaVersion *int    `json:"schema_version"`
		Host          *string `json:"host"`
		ReportedAt    *string `json:"reported_at"`
		Units         *[]Unit `json:"units"`
	}
	// One strict pass decodes a valid beacon. A newer schema is reported as
	// such rather than as an unknown field or a wrong type, so on any
	// failure, and for a schema_version other than 1, schema_version is
	// looked at first; reading it on its own costs a second pass, which a
	// tick over thousands of valid beacons need not pay.
	if err := decodeStrict(data, &w); err != nil || (w.SchemaVersion != nil && *w.SchemaVersion != SchemaVersion) {
		if serr := schemaProblem(data); serr != nil {
			return nil, serr
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	switch {
	case w.SchemaVersion == nil:
		return nil, fmt.Errorf("%w: schema_version is missing", ErrInvalid)
	case w.Host == nil:
		return nil, fmt.Errorf("%w: host is missing", ErrInvalid)
	case *w.Host != host:
		return nil, fmt.Errorf("%w: it names host %s, but it is stored as the beacon of %s", ErrInvalid, quote(*w.Host), quote(host))
	case registry.CheckHost(host) != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalid, registry.CheckHost(host))
	case w.ReportedAt == nil:
		return nil, fmt.Errorf("%w: reported_at is missing", ErrInvalid)
	case w.Units == nil:
		return nil, fmt.Errorf("%w: units is missing", ErrInvalid)
	}
	at, err := time.Parse(time.RFC3339Nano, *w.ReportedAt)
	if err != nil {
		return nil, fmt.Errorf("%w: reported_at %s is not an RFC 3339 time", ErrInvalid, quote(*w.ReportedAt))
	}
	// Beacons are dated in UTC; an offset can push the year out of what
	// RFC 3339 can write ("9999-12-31T23:59:59-23:59" is year 10000 in UTC).
	if y := at.UTC().Year(); y < 1 || y > 9999 {
		return nil, fmt.Errorf("%w: reported_at %s is outside the years 1 to 9999 in UTC", ErrInvalid, quote(*w.ReportedAt))
	}
	units, err := checkUnits(*w.Units, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Beacon{Host: host, ReportedAt: at, Units: units}, nil
}

// schemaProblem reports a schema_version other than 1, or nil.
func schemaProblem(data []byte) error {
	var probe struct {
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	if err := json.Unmarshal(data, &probe); err == nil && len(probe.SchemaVersion) > 0 {
		if v := string(probe.SchemaVersion); v != "1" {
			return fmt.Errorf("%w: schema_version %s is not %d, the only one this stado reads; upgrade stado or republish the beacon",
				ErrInvalid, quote(v), SchemaVersion)
		}
	}
	return nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// anything after the value. Errors say where, as LINE:COL.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(data, dec, err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		for end < int64(len(data)) && strings.IndexByte(" \t\r\n", data[end]) >= 0 {
			end++
		}
		line, col := lineCol(data, end)
		return fmt.Errorf("%d:%d: unexpected data after the JSON object; the document must hold one object", line, col)
	}
	return nil
}

// jsonProblem turns an encoding/json error into "LINE:COL: what".
func jsonProblem(data []byte, dec *json.Decoder, err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	off := dec.InputOffset()
	msg := strings.TrimPrefix(err.Error(), "json: ")
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
		msg = "invalid JSON: " + syn.Error()
	case errors.As(err, &typ):
		off = typ.Offset
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		msg = fmt.Sprintf("%s: expected %s, got a JSON %s", field, describeType(typ.Type.String()), typ.Value)
	case errors.Is(err, io.EOF):
		return errors.New("the document is empty; write one JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(data))
		msg = "the JSON ends before the object does (truncated?)"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The decoder has read past the field by now; the field's first
		// appearance as a key is where the operator should look.
		if name, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field ")); uerr == nil {
			if key, merr := json.Marshal(name); merr == nil {
				if i := bytes.Index(data, append(key, ':')); i >= 0 {
					off = int64(i)
				} else if i := bytes.Index(data, key); i >= 0 {
					off = int64(i)
				}
			}
		}
	}
	line, col := lineCol(data, off)
	return fmt.Errorf("%d:%d: %s", line, col, msg)
}

func describeType(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string", "beacon.State":
		return "a string"
	case "int":
		return "an integer"
	case "[]beacon.Unit":
		return "a list of units"
	}
	return "an object"
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = max(0, min(off, int64(len(data))))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	if nl := bytes.LastIndexByte(before, '\n'); nl >= 0 {
		before = before[nl+1:]
	}
	return line, utf8.RuneCount(before) + 1
}

// checkUnits validates units and returns them sorted. strict refuses every
// active state outside States (what an operator or an agent's file gives);
// otherwise any well-formed systemd word is kept (what systemd or a stored
// beacon says: a newer systemd may know states this stado does not, and they
// mean ClassUnknown).
func checkUnits(units []Unit, strict bool) ([]Unit, error) {
	if len(units) > MaxUnits {
		return nil, fmt.Errorf("units: %d units, more than the %d allowed", len(units), MaxUnits)
	}
	out := slices.Clone(units)
	if out == nil {
		out = []Unit{}
	}
	for i, u := range out {
		if err := registry.CheckUnit(u.Unit); err != nil {
			return nil, fmt.Errorf("units[%d].unit: %w", i, err)
		}
		if strict {
			if _, err := ParseState(string(u.ActiveState)); err != nil {
				return nil, fmt.Errorf("units[%d].active_state: %w", i, err)
			}
		} else if !word(string(u.ActiveState)) {
			return nil, fmt.Errorf("units[%d].active_state: %s is not a unit state (lower-case letters, digits and -, at most %d)",
				i, quote(string(u.ActiveState)), maxWordLen)
		}
		if u.SubState != "" && !word(u.SubState) {
			return nil, fmt.Errorf("units[%d].sub_state: %s is not a unit sub-state (lower-case letters, digits and -, at most %d)",
				i, quote(u.SubState), maxWordLen)
		}
	}
	slices.SortFunc(out, func(a, b Unit) int { return strings.Compare(a.Unit, b.Unit) })
	for i := 1; i < len(out); i++ {
		if out[i].Unit == out[i-1].Unit {
			return nil, fmt.Errorf("units: unit %s is listed more than once; list each unit once", quote(out[i].Unit))
		}
	}
	return out, nil
}

// word accepts a systemd state word.
func word(s string) bool {
	if s == "" || len(s) > maxWordLen || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Read reads and validates host's beacon. No beacon is an error wrapping
// ErrNoBeacon; a beacon that fails Decode, one wrapping ErrInvalid; a store
// failure is returned wrapped (objstore's sentinels still match).
func Read(ctx context.Context, store objstore.Store, host string) (*Beacon, error) {
	key, err := Key(host)
	if err != nil {
		return nil, err
	}
	obj, err := store.Get(ctx, key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return nil, fmt.Errorf("%w from %s at %s: run `stado beacon publish --host %s` on it", ErrNoBeacon, host, key, host)
	case err != nil:
		return nil, fmt.Errorf("read the beacon of %s: %w", host, err)
	}
	b, err := Decode(obj.Body, host)
	if err != nil {
		return nil, fmt.Errorf("the beacon at %s: %w", key, err)
	}
	return b, nil
}

// Result is one host's answer from ReadAll: a beacon or why there is none.
type Result struct {
	Beacon *Beacon
	Err    error
}

// ReadAll reads the beacons of hosts, at most concurrency at once (at least
// one), and answers for every distinct host. A tick costs one store read per
// host, however many services each runs.
func ReadAll(ctx context.Context, store objstore.Store, hosts []string, concurrency int) map[string]Result {
	out := make(map[string]Result, len(hosts))
	var unique []string
	for _, h := range hosts {
		if _, ok := out[h]; !ok {
			out[h] = Result{}
			unique = append(unique, h)
		}
	}
	if len(unique) == 0 {
		return out
	}
	concurrency = max(1, min(concurrency, len(unique)))
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		jobs = make(chan string)
	)
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range jobs {
				b, err := Read(ctx, store, h)
				mu.Lock()
				out[h] = Result{Beacon: b, Err: err}
				mu.Unlock()
			}
		}()
	}
	for _, h := range unique {
		jobs <- h
	}
	close(jobs)
	wg.Wait()
	return out
}

// Publish writes host's beacon with units, stamped with the store clock's
// earliest reading of now, and returns it as written. Every host writes only
// its own beacon, so the write is an unconditional put: there is no one to
// race. Units must be valid (a state systemd could report, a valid name,
// each unit once); they are stored sorted.
func Publish(ctx context.Context, store objstore.Store, host string, units []Unit) (*Beacon, error) {
	key, err := Key(host)
	if err != nil {
		return nil, err
	}
	sorted, err := checkUnits(units, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	now, err := store.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the store clock of %s to date the beacon: %w", store.Location(), err)
	}
	b := &Beacon{Host: host, ReportedAt: now.Earliest.UTC(), Units: sorted}
	body, err := b.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode the beacon of %s: %w", host, err)
	}
	if len(body) > MaxSize {
		return nil, fmt.Errorf("%w: the beacon of %s would be %d bytes, more than the %d allowed", ErrInvalid, host, len(body), MaxSize)
	}
	if _, err := store.Put(ctx, key, body); err != nil {
		return nil, fmt.Errorf("write the beacon of %s to %s: %w", host, store.Location(), err)
	}
	return b, nil
}

// quote renders a value from a beacon or an input for a message: quoted,
// control characters escaped, shortened.
func quote(s string) string {
	const maxRunes = 60
	if utf8.RuneCountInString(s) > maxRunes {
		return strconv.Quote(string([]rune(s)[:maxRunes])) + "…"
	}
	return strconv.Quote(s)
}
