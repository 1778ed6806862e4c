package registry

import (
	"strings"
	"unicode/utf8"
)

// The fast path. yaml.v3 builds a node of some 200 bytes for every key and
// value, and the strict walk records a position for every setting: for a
// registry of 100,000 services that is over a second and half a gigabyte per
// tick. Nearly every registry is written in the shape DESIGN §8 shows, one
// "key: value" per line, and that shape can be read line by line with one
// allocation per service.
//
// fastDecode is deliberately narrow: it answers ok only for a document built
// from the lines below, and for every other line, however valid as YAML, it
// gives up and Parse uses the strict decoder. It never reports problems: a
// document it accepts is also validated, and one with any problem is decoded
// again strictly so that the operator sees the strict decoder's errors.
//
//	# comment                     (at any indentation; also blank lines)
//	services:                     (at column 1, once; or services: [] for none)
//	<D>- key: value               (a new service; D spaces, the same for all)
//	<D+2>key: value               (another key of that service)
//
// key is one of the entry keys, each at most once per service; value is a
// plain scalar of safe characters, or a quoted string on one line without
// escapes, optionally followed by a comment; managed takes only plain true
// or false. FuzzParse checks that every document accepted here decodes to the
// same services on the strict path.

const (
	fName = iota
	fHost
	fUnit
	fEndpoint
	fRepair
	fChannel
	fManaged
)

var (
	valTrue  = true
	valFalse = false
)

func fieldIndex(key string) int {
	switch key {
	case "name":
		return fName
	case "host":
		return fHost
	case "unit":
		return fUnit
	case "endpoint":
		return fEndpoint
	case "repair":
		return fRepair
	case "channel":
		return fChannel
	case "managed":
		return fManaged
	}
	return -1
}

func fastDecode(data []byte) ([]entry, bool) {
	if len(data) == 0 || data[0] == 0xEF { // a byte-order mark: leave it to yaml.v3
		return nil, false
	}
	// One copy of the document; every value is a substring of it.
	s := string(data)
	const (
		top = iota
		list
		empty
	)
	state, dash := top, -1
	// Every service starts with "- ": counting them sizes the list once.
	entries := make([]entry, 0, strings.Count(s, "- "))
	var seen uint8
	for len(s) > 0 {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		rest := line[ind:]
		if rest == "" {
			continue
		}
		if rest[0] == '#' {
			if !textOK(rest) {
				return nil, false
			}
			continue
		}
		switch state {
		case top:
			tail, ok := strings.CutPrefix(rest, "services:")
			if ind != 0 || !ok {
				return nil, false
			}
			if t := strings.TrimLeft(tail, " "); strings.HasPrefix(t, "[]") && len(t) < len(tail) {
				if !trailerOK(t[2:]) {
					return nil, false
				}
				state = empty
				continue
			}
			if !trailerOK(tail) {
				return nil, false
			}
			state = list
		case empty:
			return nil, false
		case list:
			switch {
			case (dash < 0 || ind == dash) && strings.HasPrefix(rest, "- ") && len(rest) > 2 && rest[2] != ' ':
				dash = ind
				entries = append(entries, entry{})
				seen = 0
				rest = rest[2:]
			case dash >= 0 && ind == dash+2:
			default:
				return nil, false
			}
			if !fastField(&entries[len(entries)-1], &seen, rest) {
				return nil, false
			}
		}
	}
	if state == top || state == list && len(entries) == 0 {
		return nil, false
	}
	return entries, true
}

// fastField reads one "key: value" into e.
func fastField(e *entry, seen *uint8, kv string) bool {
	colon := strings.IndexByte(kv, ':')
	if colon <= 0 {
		return false
	}
	f := fieldIndex(kv[:colon])
	if f < 0 || *seen&(1<<f) != 0 {
		return false
	}
	*seen |= 1 << f
	v := kv[colon+1:]
	if v == "" || v[0] != ' ' {
		return false
	}
	v = strings.TrimLeft(v, " ")
	val, plain, ok := fastScalar(v)
	if !ok || val == "" {
		// An empty quoted value: whether a key is present decides how the
		// strict path validates it (endpoint: '' is refused there), and
		// this path does not record presence.
		return false
	}
	switch f {
	case fName:
		e.Name = val
	case fHost:
		e.Host = val
	case fUnit:
		e.Unit = val
	case fEndpoint:
		e.Endpoint = val
	case fRepair:
		e.Repair = val
	case fChannel:
		e.Channel = val
	case fManaged:
		switch {
		case plain && val == "true":
			e.Managed = &valTrue
		case plain && val == "false":
			e.Managed = &valFalse
		default:
			return false
		}
	}
	return true
}

// fastScalar reads a value and what may follow it on its line.
func fastScalar(v string) (val string, plain, ok bool) {
	if v == "" {
		return "", false, false
	}
	switch q := v[0]; q {
	case '"', '\'':
		end := strings.IndexByte(v[1:], q)
		if end < 0 {
			return "", false, false
		}
		val = v[1 : 1+end]
		if strings.IndexByte(val, '\\') >= 0 || !textOK(val) || !trailerOK(v[2+end:]) {
			return "", false, false
		}
		return val, false, true
	}
	if !plainStart(v[0]) {
		return "", false, false
	}
	end := 1
	for end < len(v) && plainChar(v[end]) {
		end++
	}
	val = v[:end]
	if val[len(val)-1] == ':' || val == "null" || val == "Null" || val == "NULL" || !trailerOK(v[end:]) {
		return "", false, false
	}
	return val, true, true
}

func plainStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/'
}

func plainChar(c byte) bool {
	return plainStart(c) || strings.IndexByte("-@:?=&%+~,", c) >= 0
}

// trailerOK accepts what may follow a value: nothing, or spaces and an
// optional comment.
func trailerOK(t string) bool {
	if t == "" {
		return true
	}
	if t[0] != ' ' {
		return false
	}
	t = strings.TrimLeft(t, " ")
	return t == "" || (t[0] == '#' && textOK(t))
}

// textOK accepts text that yaml.v3 reads as it stands inside a comment or a
// one-line quoted string: printable ASCII, and non-ASCII characters that YAML
// allows and that are not line breaks to it (NEL, LS, PS) or a byte-order
// mark. Tabs are left to the strict path.
func textOK(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return false
		case r < 0xA0, r == 0x2028, r == 0x2029, r == 0xFEFF,
			r > 0xD7FF && r < 0xE000, r == 0xFFFE, r == 0xFFFF:
			return false
		}
		i += size
	}
	return true
}
