package reports

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// A report of 100,000 services is some 24 MB of indented JSON, written twice
// per tick (the run report and latest.json). encoding/json's MarshalIndent
// builds it by reflection into a compact buffer and then indents that into a
// second one; for the outcomes, which are nearly all of it, marshal writes the
// same bytes directly. The header (every field but the outcomes) still goes
// through MarshalIndent, so that times, the summary's map order and any field
// added later are encoded exactly as encoding/json does; TestMarshalMatches
// and FuzzMarshalMatches hold the whole document to MarshalIndent's bytes.

// marshal encodes r as MarshalIndent(r, "", "  ") does, plus a newline.
func (r *Report) marshal() ([]byte, error) {
	hdr := *r
	hdr.Outcomes = nil
	head, err := json.MarshalIndent(&hdr, "", "  ")
	if err != nil {
		return nil, err
	}
	if r.Outcomes == nil {
		return append(head, '\n'), nil
	}
	const tail = `"outcomes": null` + "\n}"
	if !bytes.HasSuffix(head, []byte(tail)) {
		// Outcomes is not the last field any more: encode it all the
		// slow way rather than guess.
		b, err := json.MarshalIndent(r, "", "  ")
		return append(b, '\n'), err
	}
	head = head[:len(head)-len(tail)]
	out := make([]byte, 0, len(head)+len(r.Outcomes)*300+32)
	out = append(out, head...)
	out = append(out, `"outcomes": [`...)
	if len(r.Outcomes) == 0 {
		return append(out, "]\n}\n"...), nil
	}
	for i := range r.Outcomes {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendOutcome(out, &r.Outcomes[i])
	}
	return append(out, "\n  ]\n}\n"...), nil
}

// appendOutcome writes one outcome as an element of the indented outcomes
// array (struct field order, omitempty where the struct says so).
func appendOutcome(b []byte, o *Outcome) []byte {
	b = append(b, "\n    {\n      \"host\": "...)
	b = appendString(b, o.Host)
	b = append(b, ",\n      \"service\": "...)
	b = appendString(b, o.Service)
	b = append(b, ",\n      \"unit\": "...)
	b = appendString(b, o.Unit)
	b = append(b, ",\n      \"beacon_state\": "...)
	b = appendString(b, o.BeaconState)
	b = append(b, ",\n      \"endpoint_state\": "...)
	b = appendString(b, o.EndpointState)
	b = append(b, ",\n      \"classification\": "...)
	b = appendString(b, o.Classification)
	if o.Action != "" {
		b = append(b, ",\n      \"action\": "...)
		b = appendString(b, o.Action)
	}
	b = append(b, ",\n      \"changed\": "...)
	b = strconv.AppendBool(b, o.Changed)
	if o.Detail != "" {
		b = append(b, ",\n      \"detail\": "...)
		b = appendString(b, o.Detail)
	}
	b = append(b, ",\n      \"duration_ms\": "...)
	b = strconv.AppendInt(b, o.DurationMS, 10)
	return append(b, "\n    }"...)
}

const hexDigits = "0123456789abcdef"

// appendString quotes s exactly as encoding/json does (with its default HTML
// escaping): ", \ and control characters escaped, <, > and & as \u003c,
// \u003e and \u0026, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
