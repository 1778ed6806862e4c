// Package termsafe makes text that came from stored data safe to write to an
// operator's terminal: a hostile beacon or report must not be able to move
// the cursor, rewrite the screen, set the window title or ring the bell.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every control character (C0, DEL, C1) rendered as a
// visible escape (\x1b, \u009b), invalid UTF-8 bytes as \xNN, and the
// Unicode bidirectional controls (which can reorder what an operator reads)
// as \uNNNN. Newlines and tabs are escaped too: use Lines for multi-line text.
func Escape(s string) string { return escape(s, false) }

// Lines is Escape but keeps newlines and tabs, for multi-line output such as
// a stored document.
func Lines(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	if clean(s, keepLines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case (r >= 0x80 && r < 0xa0) || bidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func bidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return false // decide rune by rune
		}
		if c < 0x20 || c == 0x7f {
			if keepLines && (c == '\n' || c == '\t') {
				continue
			}
			return false
		}
	}
	return true
}

// JSON makes encoded JSON safe for a terminal. encoding/json escapes the C0
// controls but writes DEL, the C1 controls (U+0080-U+009F, the 8-bit CSI
// among them) and the bidirectional controls raw; JSON writes them here as
// \u escapes, which decode to the same strings. Such characters can only
// occur inside JSON strings, so the document's meaning is unchanged.
func JSON(b []byte) []byte {
	if clean(string(b), true) {
		return b
	}
	var out strings.Builder
	s := string(b)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out.WriteString(`\ufffd`)
		case r == 0x7f || (r >= 0x80 && r < 0xa0) || bidi(r):
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.WriteString(s[i : i+size])
		}
		i += size
	}
	return []byte(out.String())
}
