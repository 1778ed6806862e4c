package beacon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

func newStore() (*objstore.Mem, *clock.Fake) {
	c := clock.NewFake(t0)
	return objstore.NewMem(c), c
}

func TestPublishWritesTheDesignShape(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore()
	b, err := Publish(ctx, s, "web-1", []Unit{
		{Unit: "worker.service", ActiveState: Active, SubState: "running"},
		{Unit: "api.service", ActiveState: Failed, SubState: "failed"},
	})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Get(ctx, "state/beacons/web-1.json")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema_version":1,"host":"web-1","reported_at":"2026-11-30T12:00:00.123456789Z",` +
		`"units":[{"unit":"api.service","active_state":"failed","sub_state":"failed"},` +
		`{"unit":"worker.service","active_state":"active","sub_state":"running"}]}`
	if string(obj.Body) != want {
		t.Errorf("stored\n%s\nwant\n%s", obj.Body, want)
	}
	if !b.ReportedAt.Equal(t0) {
		t.Errorf("ReportedAt %s, want the store clock %s", b.ReportedAt, t0)
	}
	got, err := Read(ctx, s, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "web-1" || !got.ReportedAt.Equal(t0) || !reflect.DeepEqual(got.Units, b.Units) {
		t.Errorf("Read = %+v, published %+v", got, b)
	}
	u, ok := got.Unit("api.service")
	if !ok || u.ActiveState != Failed || u.SubState != "failed" {
		t.Errorf("Unit(api.service) = %+v, %v", u, ok)
	}
	if _, ok := got.Unit("absent.service"); ok {
		t.Error("a unit the beacon does not list must be absent")
	}
}

// TestReportedAtKeepsTrailingZeros: every write carries all nine digits, so
// two writes a whole second apart still differ in shape from none.
func TestReportedAtKeepsTrailingZeros(t *testing.T) {
	ctx := context.Background()
	s, c := newStore()
	c.Set(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	if _, err := Publish(ctx, s, "web-1", nil); err != nil {
		t.Fatal(err)
	}
	obj, _ := s.Get(ctx, "state/beacons/web-1.json")
	if want := `{"schema_version":1,"host":"web-1","reported_at":"2026-11-30T12:00:00.000000000Z","units":[]}`; string(obj.Body) != want {
		t.Errorf("stored %s, want %s", obj.Body, want)
	}
}

func TestPublishRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore()
	for _, c := range []struct {
		host  string
		units []Unit
		want  string
	}{
		{"../etc", nil, `host "../etc" contains '/'`},
		{"web-1/x", nil, `contains '/'`},
		{"..", nil, `starts with "."`},
		{"-web", nil, `starts with "-"`},
		{"web-1", []Unit{{Unit: "../../x", ActiveState: Active}}, `units[0].unit: invalid name: unit "../../x" contains '/'`},
		{"web-1", []Unit{{Unit: "a.service", ActiveState: "Active!"}}, `units[0].active_state: "Active!" is not a unit state`},
		{"web-1", []Unit{{Unit: "a.service", ActiveState: Active, SubState: "run\x1bning"}}, `units[0].sub_state: "run\x1bning" is not a unit sub-state`},
		{"web-1", []Unit{{Unit: "a.service", ActiveState: Active}, {Unit: "a.service", ActiveState: Failed}}, `unit "a.service" is listed more than once`},
		{"web-1", make([]Unit, MaxUnits+1), "10001 units, more than the 10000 allowed"},
	} {
		_, err := Publish(ctx, s, c.host, c.units)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Publish(%q) = %v, want ErrInvalid containing %q", c.host, err, c.want)
		}
	}
	n := 0
	_ = s.List(ctx, Prefix, func(objstore.Entry) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d beacons written by refused publishes", n)
	}
}

func TestFreshness(t *testing.T) {
	b := &Beacon{Host: "web-1", ReportedAt: t0}
	silence := 300 * time.Second
	at := func(earliest, latest time.Duration) objstore.TimeBounds {
		return objstore.TimeBounds{Earliest: t0.Add(earliest), Latest: t0.Add(latest)}
	}
	cases := []struct {
		name string
		now  objstore.TimeBounds
		want error
	}{
		{"just published", at(0, 0), nil},
		{"one second before silence ends", at(299*time.Second, 299*time.Second), nil},
		{"silence reached", at(300*time.Second, 300*time.Second), ErrStale},
		// The latest possible now is past the silence: not certainly fresh.
		{"uncertain clock straddles the silence", at(298*time.Second, 301*time.Second), ErrStale},
		{"long silent", at(2*time.Hour, 2*time.Hour), ErrStale},
		// Another reconciler's clock may lag the publisher's a little.
		{"slightly ahead of the reader", at(-3*time.Second, -2*time.Second), nil},
		{"in the future", at(-10*time.Minute, -10*time.Minute), ErrFromFuture},
		{"far in the future", at(-24*365*time.Hour, -24*365*time.Hour), ErrFromFuture},
	}
	for _, c := range cases {
		err := b.Freshness(c.now, silence)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: Freshness = %v, want %v", c.name, err, c.want)
		}
		if b.Fresh(c.now, silence) != (c.want == nil) {
			t.Errorf("%s: Fresh disagrees with Freshness", c.name)
		}
	}
	err := b.Freshness(at(2*time.Hour, 2*time.Hour), silence)
	want := "beacon is stale: the beacon of web-1 was reported at 2026-11-30T12:00:00.123456789Z, 2h0m0s ago, longer than the beacon silence of 5m0s; " +
		"its units are unknown until `stado beacon publish --host web-1` runs there again"
	if err.Error() != want {
		t.Errorf("stale text\n got %s\nwant %s", err, want)
	}
	err = b.Freshness(at(-time.Hour, -time.Hour), silence)
	if !strings.Contains(err.Error(), "1h0m0s ahead of the store clock; it is not used as evidence") {
		t.Errorf("future text: %s", err)
	}
}

func TestStateClass(t *testing.T) {
	want := map[State]Class{
		Active: ClassUp, Activating: ClassTransitional, Deactivating: ClassTransitional, Reloading: ClassTransitional,
		Failed: ClassDown, Inactive: ClassDown, "maintenance": ClassUnknown, "refreshing": ClassUnknown, "": ClassUnknown,
	}
	for s, c := range want {
		if s.Class() != c {
			t.Errorf("%q.Class() = %s, want %s", s, s.Class(), c)
		}
	}
}

// hostile beacons: each must be an error wrapping ErrInvalid (never a panic,
// never a beacon), with the reason in its text.
func TestDecodeHostile(t *testing.T) {
	const at = `"2026-11-30T12:00:00.5Z"`
	str := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	unit := func(name, state string) string {
		return fmt.Sprintf(`{"unit":%s,"active_state":%s,"sub_state":"dead"}`, str(name), str(state))
	}
	beacon := func(host string, units ...string) string {
		return fmt.Sprintf(`{"schema_version":1,"host":%s,"reported_at":%s,"units":[%s]}`, str(host), at, strings.Join(units, ","))
	}
	many := make([]string, MaxUnits+1)
	for i := range many {
		many[i] = unit(fmt.Sprintf("u%d.service", i), "active")
	}
	cases := map[string]struct{ body, want string }{
		"control character in a unit": {beacon("web-1", unit("api\x1b[2J.service", "failed")), `unit "api\x1b[2J.service" contains '\x1b'`},
		"C1 control in a unit":        {beacon("web-1", unit("api\u009b.service", "failed")), `contains '\u009b'`},
		"path in a unit":              {beacon("web-1", unit("../../etc/passwd", "failed")), `contains '/'`},
		"too many units":              {beacon("web-1", many...), "10001 units, more than the 10000 allowed"},
		"duplicate unit":              {beacon("web-1", unit("a.service", "active"), unit("a.service", "failed")), `unit "a.service" is listed more than once`},
		"garbage state":               {beacon("web-1", unit("a.service", "<script>")), `"<script>" is not a unit state`},
		"other host":                  {beacon("web-2", unit("a.service", "active")), `it names host "web-2", but it is stored as the beacon of "web-1"`},
		"path in host":                {beacon("../web-1"), `it names host "../web-1"`},
		"wrong type: host":            {`{"schema_version":1,"host":42,"reported_at":` + at + `,"units":[]}`, "1:30: host: expected a string, got a JSON number"},
		"wrong type: units":           {`{"schema_version":1,"host":"web-1","reported_at":` + at + `,"units":{"a":1}}`, "units: expected a list of units, got a JSON object"},
		"wrong type: schema":          {`{"schema_version":"1","host":"web-1","reported_at":` + at + `,"units":[]}`, `schema_version "\"1\"" is not 1`},
		"newer schema":                {`{"schema_version":2,"host":"web-1","reported_at":` + at + `,"units":[],"load":1}`, `schema_version "2" is not 1, the only one this stado reads`},
		"truncated":                   {beacon("web-1", unit("a.service", "active"))[:60], "the JSON ends before the object does (truncated?)"},
		"empty":                       {``, "the document is empty"},
		"not an object":               {`[1,2]`, "expected an object, got a JSON array"},
		"trailing data":               {beacon("web-1") + ` {"x":1}`, "unexpected data after the JSON object"},
		"unknown field":               {`{"schema_version":1,"host":"web-1","reported_at":` + at + `,"units":[],"evil":true}`, `unknown field "evil"`},
		"unknown unit field":          {beacon("web-1", `{"unit":"a.service","active_state":"active","pid":1}`), `unknown field "pid"`},
		"missing host":                {`{"schema_version":1,"reported_at":` + at + `,"units":[]}`, "host is missing"},
		"missing reported_at":         {`{"schema_version":1,"host":"web-1","units":[]}`, "reported_at is missing"},
		"missing units":               {`{"schema_version":1,"host":"web-1","reported_at":` + at + `}`, "units is missing"},
		"null units":                  {`{"schema_version":1,"host":"web-1","reported_at":` + at + `,"units":null}`, "units is missing"},
		"missing schema":              {`{"host":"web-1","reported_at":` + at + `,"units":[]}`, "schema_version is missing"},
		"bad time":                    {`{"schema_version":1,"host":"web-1","reported_at":"yesterday","units":[]}`, `reported_at "yesterday" is not an RFC 3339 time`},
		"deep nesting":                {strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "invalid JSON"},
		"invalid UTF-8 in unit":       {beacon("web-1", unit("a\xff.service", "active")), "contains"},
		"oversized":                   {`{"schema_version":1,"host":"web-1","reported_at":` + at + `,"units":[],"x":"` + strings.Repeat("a", MaxSize) + `"}`, "more than the 4194304 allowed"},
		"empty unit name":             {beacon("web-1", unit("", "active")), "unit must not be empty"},
		"leading dash unit":           {beacon("web-1", unit("--now", "active")), `starts with "-"`},
		"NUL in sub_state":            {beacon("web-1", `{"unit":"a.service","active_state":"active","sub_state":"run\u0000"}`), `sub_state: "run\x00" is not a unit sub-state`},
	}
	for name, c := range cases {
		b, err := Decode([]byte(c.body), "web-1")
		if b != nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Decode = %+v, %v; want ErrInvalid", name, b, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not contain %q", name, err, c.want)
		}
	}
}

// TestDecodeFutureBeaconIsReadButNotFresh: a beacon dated a year ahead is
// well-formed; it is Freshness that refuses it as evidence.
func TestDecodeFutureBeaconIsReadButNotFresh(t *testing.T) {
	body := `{"schema_version":1,"host":"web-1","reported_at":"2027-11-30T12:00:00Z","units":[]}`
	b, err := Decode([]byte(body), "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Freshness(objstore.TimeBounds{Earliest: t0, Latest: t0}, time.Hour); !errors.Is(err, ErrFromFuture) {
		t.Errorf("Freshness = %v, want ErrFromFuture", err)
	}
}

func TestDecodeKeepsUnknownSystemdStates(t *testing.T) {
	body := `{"schema_version":1,"host":"web-1","reported_at":"2026-11-30T12:00:00Z","units":[{"unit":"a.service","active_state":"maintenance","sub_state":""}]}`
	b, err := Decode([]byte(body), "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := b.Unit("a.service"); u.ActiveState != "maintenance" || u.ActiveState.Class() != ClassUnknown {
		t.Errorf("unit %+v", u)
	}
}

func TestReadErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore()
	_, err := Read(ctx, s, "web-1")
	if !errors.Is(err, ErrNoBeacon) || err.Error() != "no beacon from web-1 at state/beacons/web-1.json: run `stado beacon publish --host web-1` on it" {
		t.Errorf("no beacon: %v", err)
	}
	if _, err := s.Put(ctx, "state/beacons/web-1.json", []byte(`{"schema_version":1`)); err != nil {
		t.Fatal(err)
	}
	_, err = Read(ctx, s, "web-1")
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "the beacon at state/beacons/web-1.json: invalid beacon: 1:20: ") {
		t.Errorf("corrupt beacon: %v", err)
	}
	if _, err := Read(ctx, s, "../web-1"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a host that is not a name: %v", err)
	}
}

// gatedStore holds every Get until `want` Gets are in flight at once (or a
// second passes), and records the peak: it shows reads run in parallel, up
// to the limit and not beyond.
type gatedStore struct {
	*objstore.Counting
	want           int32
	inflight, peak atomic.Int32
}

func (g *gatedStore) Get(ctx context.Context, key string) (objstore.Object, error) {
	cur := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	for {
		p := g.peak.Load()
		if cur <= p || g.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	deadline := time.Now().Add(time.Second)
	for g.inflight.Load() < g.want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	return g.Counting.Get(ctx, key)
}

func TestReadAllInParallelOncePerHost(t *testing.T) {
	ctx := context.Background()
	mem, _ := newStore()
	var hosts []string
	for i := 0; i < 20; i++ {
		h := fmt.Sprintf("web-%d", i)
		switch i % 4 {
		case 0: // no beacon
		case 1:
			if _, err := mem.Put(ctx, "state/beacons/"+h+".json", []byte("{garbage")); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := Publish(ctx, mem, h, []Unit{{Unit: "api.service", ActiveState: Active}}); err != nil {
				t.Fatal(err)
			}
		}
		// Every host is named three times, as one per service would be.
		hosts = append(hosts, h, h, h)
	}
	g := &gatedStore{Counting: objstore.NewCounting(mem), want: 4}
	res := ReadAll(ctx, g, hosts, 4)
	if len(res) != 20 {
		t.Fatalf("%d results for 20 hosts", len(res))
	}
	if got := g.Counts()["get"]; got != 20 {
		t.Errorf("%d reads for 20 hosts", got)
	}
	if p := g.peak.Load(); p != 4 {
		t.Errorf("peak of %d concurrent reads, want 4", p)
	}
	for i := 0; i < 20; i++ {
		r := res[fmt.Sprintf("web-%d", i)]
		switch i % 4 {
		case 0:
			if !errors.Is(r.Err, ErrNoBeacon) || r.Beacon != nil {
				t.Errorf("web-%d: %+v, want no beacon", i, r)
			}
		case 1:
			if !errors.Is(r.Err, ErrInvalid) || r.Beacon != nil {
				t.Errorf("web-%d: %+v, want invalid", i, r)
			}
		default:
			if r.Err != nil || r.Beacon == nil || r.Beacon.Host != fmt.Sprintf("web-%d", i) {
				t.Errorf("web-%d: %+v", i, r)
			}
		}
	}
}

func TestParseStateFlags(t *testing.T) {
	units, err := ParseStateFlags([]string{"api.service=failed", "worker@1.service=active", "db.service=reloading"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Unit{{Unit: "api.service", ActiveState: Failed}, {Unit: "worker@1.service", ActiveState: Active}, {Unit: "db.service", ActiveState: Reloading}}
	if !reflect.DeepEqual(units, want) {
		t.Errorf("got %+v", units)
	}
	for flag, want := range map[string]string{
		"api.service":             `--state "api.service": write UNIT=STATE, e.g. --state api.service=failed`,
		"api.service=up":          `--state "api.service=up": unknown unit state "up"; use one of: active, failed, inactive, activating, deactivating, reloading`,
		"api.service=Active":      `unknown unit state "Active"`,
		"api.service=maintenance": `unknown unit state "maintenance"`,
		"=active":                 `--state "=active": invalid name: unit must not be empty`,
		"../x=active":             `unit "../x" contains '/'`,
		"-x=active":               `unit "-x" starts with "-"`,
	} {
		_, err := ParseStateFlags([]string{flag})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseStateFlags(%q) = %v, want %q", flag, err, want)
		}
	}
	if _, err := ParseStateFlags([]string{"a.service=active", "a.service=failed"}); err == nil || !strings.Contains(err.Error(), "given more than once") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestDecodeUnitsFile(t *testing.T) {
	good := map[string]string{
		"units only":          `{"units":[{"unit":"api.service","active_state":"failed","sub_state":"failed"},{"unit":"b.service","active_state":"active"}]}`,
		"beacon shape":        `{"schema_version":1,"host":"web-1","units":[{"unit":"api.service","active_state":"failed","sub_state":"failed"},{"unit":"b.service","active_state":"active"}]}`,
		"pretty, other order": "{\n  \"units\": [\n    {\"active_state\": \"active\", \"unit\": \"b.service\"},\n    {\"unit\": \"api.service\", \"active_state\": \"failed\", \"sub_state\": \"failed\"}\n  ]\n}\n",
	}
	want := []Unit{{Unit: "api.service", ActiveState: Failed, SubState: "failed"}, {Unit: "b.service", ActiveState: Active}}
	for name, doc := range good {
		units, err := DecodeUnitsFile([]byte(doc), "web-1")
		if err != nil || !reflect.DeepEqual(units, want) {
			t.Errorf("%s: %+v, %v", name, units, err)
		}
	}
	if units, err := DecodeUnitsFile([]byte(`{"units":[]}`), "web-1"); err != nil || units == nil || len(units) != 0 {
		t.Errorf("no units: %+v, %v", units, err)
	}
	bad := map[string]string{
		`{"units":[{"unit":"a.service","active_state":"up"}]}`:             `units[0].active_state: unknown unit state "up"; use one of: active, failed`,
		`{"units":[{"unit":"a.service","active_state":"active","pid":3}]}`: `1:55: unknown field "pid"`,
		"{\n  \"units\": [\n    {\"unit\": 7}\n  ]\n}":                     `3:15: units.unit: expected a string, got a JSON number`,
		`{"units":[{"unit":"a.service"}]}`:                                 `units[0].active_state: missing or empty; use one of: active, failed, inactive, activating, deactivating, reloading`,
		`{"units":[{"active_state":"active"}]}`:                            `units[0].unit: missing or empty`,
		`{"host":"web-2","units":[]}`:                                      `host: the file is for host "web-2", but --host is "web-1"`,
		`{"reported_at":"2026-11-30T12:00:00Z","units":[]}`:                `reported_at: stado dates every beacon on the store's clock when it publishes; remove reported_at from the file`,
		`{"schema_version":2,"units":[]}`:                                  `schema_version: 2 is not 1`,
		`{}`:                                                               `units: missing`,
		`{"units":[]} {"units":[]}`:                                        `1:14: unexpected data after the JSON object`,
		`{"units":[`:                                                       `1:11: the JSON ends before the object does (truncated?)`,
		``:                                                                 `the document is empty`,
		`{"units":[{"unit":"a.service","active_state":"active"},{"unit":"a.service","active_state":"failed"}]}`: `unit "a.service" is listed more than once`,
	}
	for doc, want := range bad {
		_, err := DecodeUnitsFile([]byte(doc), "web-1")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeUnitsFile(%q) = %v, want %q", doc, err, want)
		}
	}
}
