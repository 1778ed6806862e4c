package beacon

import (
	"errors"
	"testing"
)

// TestDecodeRefusesReportedAtOutsideUTCYears is the regression test of a bug
// the reliability suite's beacon corpus found (FuzzDecode, seed
// year_10000_in_utc): Decode accepted reported_at
// "9999-12-31T23:59:59-23:59", which is year 10000 in UTC, so the beacon it
// returned encoded to a document Decode itself refuses.
func TestDecodeRefusesReportedAtOutsideUTCYears(t *testing.T) {
	for _, at := range []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+00:01"} {
		_, err := Decode([]byte(`{"schema_version":1,"host":"web-1","reported_at":"`+at+`","units":[]}`), "web-1")
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("reported_at %s: %v, want ErrInvalid", at, err)
		}
	}
	b, err := Decode([]byte(`{"schema_version":1,"host":"web-1","reported_at":"9999-12-31T23:59:59+01:00","units":[]}`), "web-1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(out, "web-1"); err != nil {
		t.Fatalf("a beacon Decode accepted does not decode again once encoded: %v", err)
	}
}
