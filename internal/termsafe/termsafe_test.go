package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want, wantLines string }{
		{"plain web-1:api.service", "plain web-1:api.service", "plain web-1:api.service"},
		{"\x1b[2J\x1b]0;pwned\x07", `\x1b[2J\x1b]0;pwned\x07`, `\x1b[2J\x1b]0;pwned\x07`},
		{"a\nb\tc\r", `a\x0ab\x09c\x0d`, "a\nb\tc\\x0d"},
		{"\u009b31m", `\u009b31m`, `\u009b31m`},
		{"ab\u202ecd", `ab\u202ecd`, `ab\u202ecd`},
		{"bad\xffbyte", `bad\xffbyte`, `bad\xffbyte`},
		{"héllo ✓", "héllo ✓", "héllo ✓"},
		{"\x7f", `\x7f`, `\x7f`},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := Lines(tc.in); got != tc.wantLines {
			t.Errorf("Lines(%q) = %q, want %q", tc.in, got, tc.wantLines)
		}
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("\x1b[31mred")
	f.Add("ok")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Escape(s), Lines(s)} {
			for _, r := range out {
				if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) || bidi(r) {
					t.Fatalf("escaped %q still contains %U", s, r)
				}
			}
		}
		if strings.ContainsAny(Escape(s), "\n\t") {
			t.Fatalf("Escape kept a newline or tab: %q", Escape(s))
		}
	})
}

func TestJSON(t *testing.T) {
	in := []byte("{\"a\":\"x\u009b31m\u202e\x7fy\",\"b\":\"plain\"}\n")
	got := string(JSON(in))
	want := "{\"a\":\"x\\u009b31m\\u202e\\u007fy\",\"b\":\"plain\"}\n"
	if got != want {
		t.Fatalf("JSON = %q, want %q", got, want)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(got), &v); err != nil || v["a"] != "x\u009b31m\u202e\x7fy" {
		t.Fatalf("escaped JSON decodes to %q, %v", v["a"], err)
	}
}
