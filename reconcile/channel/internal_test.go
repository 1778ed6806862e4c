package channel

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stado/stado/internal/termsafe"
)

func TestTailKeepsBoundedEnd(t *testing.T) {
	tl := newTail(8)
	for _, w := range []string{"abc", "defgh", "ij", "0123456789XY", "z"} {
		if _, err := tl.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
		if len(tl.buf) > 8 || cap(tl.buf) > 16 {
			t.Fatalf("after %q the buffer is %d bytes (cap %d)", w, len(tl.buf), cap(tl.buf))
		}
	}
	// 23 bytes written, the last 8 kept.
	if got, want := tl.String(), "[15 earlier bytes omitted]\n56789XYz"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	small := newTail(64)
	small.Write([]byte("ok\n"))
	if got := small.String(); got != "ok\n" {
		t.Errorf("an untruncated tail = %q", got)
	}
}

func TestTailStartsAtCharacterBoundaryAndRedacts(t *testing.T) {
	tl := newTail(6)
	tl.Write([]byte("xx✓secret")) // ✓ is 3 bytes: the kept 6 start inside it
	if got, want := tl.String("secret"), "[5 earlier bytes omitted]\nREDACTED"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestEscapeControl(t *testing.T) {
	for _, tc := range []struct{ in, lines, oneLine string }{
		{"plain web-1:api.service", "plain web-1:api.service", "plain web-1:api.service"},
		{"\x1b[2J\x1b]0;pwned\x07", `\x1b[2J\x1b]0;pwned\x07`, `\x1b[2J\x1b]0;pwned\x07`},
		{"a\nb\tc\r", "a\nb\tc\\x0d", `a\x0ab\x09c\x0d`},
		{"\u009b31m", `\u009b31m`, `\u009b31m`},
		{"ab\u202ecd\u2066", `ab\u202ecd\u2066`, `ab\u202ecd\u2066`},
		{"bad\xffbyte", `bad\xffbyte`, `bad\xffbyte`},
		{"héllo ✓\x7f", `héllo ✓\x7f`, `héllo ✓\x7f`},
	} {
		if got := termsafe.Lines(tc.in); got != tc.lines {
			t.Errorf("escapeControl(%q, true) = %q, want %q", tc.in, got, tc.lines)
		}
		if got := termsafe.Escape(tc.in); got != tc.oneLine {
			t.Errorf("escapeControl(%q, false) = %q, want %q", tc.in, got, tc.oneLine)
		}
	}
}

// TestShellQuoteRoundTrips runs the quoted words through a real POSIX shell
// and checks it hands every one back unchanged, as one argument.
func TestShellQuoteRoundTrips(t *testing.T) {
	words := []string{"", "plain", "it's", "''", `a"b`, "$(id)", "`id`", `\`, "a b\tc\nd", "*", "~", "-n", ";|&<>", "é✓"}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	out, err := exec.Command("/bin/sh", "-c", "set -- "+strings.Join(quoted, " ")+`; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if strings.Join(got, "|") != strings.Join(words, "|") || len(got) != len(words) {
		t.Errorf("the shell parsed\n%q\nwant\n%q", got, words)
	}
}

func TestErrorTail(t *testing.T) {
	if got := errorTail("  \n"); got != "none" {
		t.Errorf("errorTail(blank) = %q", got)
	}
	if got := errorTail("a\nb\tc\n"); got != `"a\nb\tc"` {
		t.Errorf("errorTail = %q", got)
	}
	long := strings.Repeat("x", 600) + "END"
	if got := errorTail(long); len(got) > errorTailLimit+5 || !strings.HasSuffix(got, `END"`) || !strings.HasPrefix(got, `"...`) {
		t.Errorf("errorTail(long) = %q", got)
	}
}
