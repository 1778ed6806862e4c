package beacon

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/reconcile/registry"
)

// FuzzDecode: whatever a stored beacon holds, Decode must not panic or hang;
// it returns either an error wrapping ErrInvalid and no beacon, or a beacon
// that is valid in every respect a reconciler relies on and that encodes
// back to a document Decode reads identically. The committed corpus in
// testdata/fuzz/FuzzDecode holds valid and hostile beacons.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"host":"web-1","reported_at":"2026-11-30T12:00:00.123456789Z","units":[{"unit":"api.service","active_state":"failed","sub_state":"failed"}]}`), "web-1")
	f.Add([]byte(`{"schema_version":1,"host":"web-1","reported_at":"2026-11-30T12:00:00Z","units":[]}`), "web-1")
	f.Fuzz(func(t *testing.T, data []byte, host string) {
		timer := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Decode hung on %q", data)) })
		b, err := Decode(data, host)
		timer.Stop()
		if err != nil {
			if b != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode = %v, %v; want no beacon and ErrInvalid", b, err)
			}
			return
		}
		if b.Host != host || registry.CheckHost(host) != nil {
			t.Fatalf("accepted host %q for %q", b.Host, host)
		}
		if len(b.Units) > MaxUnits {
			t.Fatalf("%d units", len(b.Units))
		}
		for i, u := range b.Units {
			if registry.CheckUnit(u.Unit) != nil || !word(string(u.ActiveState)) || (u.SubState != "" && !word(u.SubState)) {
				t.Fatalf("accepted unit %+v", u)
			}
			if i > 0 && b.Units[i-1].Unit >= u.Unit {
				t.Fatalf("units not sorted and unique: %v", b.Units)
			}
			if got, ok := b.Unit(u.Unit); !ok || got != u {
				t.Fatalf("Unit(%q) = %+v, %v", u.Unit, got, ok)
			}
		}
		out, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(out, host)
		if err != nil {
			t.Fatalf("re-decoding the encoded beacon: %v\n%s", err, out)
		}
		if !again.ReportedAt.Equal(b.ReportedAt) || !reflect.DeepEqual(again.Units, b.Units) {
			t.Fatalf("round trip changed the beacon:\n%+v\n%+v", b, again)
		}
	})
}

// FuzzParseShow: whatever systemctl prints, ParseShow must not panic; what
// it accepts is blocks of property names and values without line breaks,
// none empty, that survive being printed again.
func FuzzParseShow(f *testing.F) {
	f.Add([]byte("Id=api.service\nNames=api.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\n\nId=x\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		blocks, err := ParseShow(out)
		if err != nil {
			if blocks != nil {
				t.Fatal("blocks returned along with an error")
			}
			return
		}
		var b strings.Builder
		for i, block := range blocks {
			if len(block) == 0 {
				t.Fatal("an empty block")
			}
			if i > 0 {
				b.WriteString("\n")
			}
			keys := make([]string, 0, len(block))
			for k, v := range block {
				if !propertyName(k) || strings.Contains(v, "\n") {
					t.Fatalf("accepted %q=%q", k, v)
				}
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				b.WriteString(k + "=" + block[k] + "\n")
			}
		}
		again, err := ParseShow([]byte(b.String()))
		if err != nil || !reflect.DeepEqual(again, blocks) {
			t.Fatalf("re-parsing %q: %v, %v; want %v", b.String(), again, err, blocks)
		}
	})
}
