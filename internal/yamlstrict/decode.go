// Package yamlstrict owns strict decoding of stado's operator-edited YAML
// files (the policy, the service registry, the local config) into Go structs.
//
// yaml.v3's own decoder places a problem at a line but never a column,
// does not say which keys were expected or which one was probably meant,
// accepts yes/no/on/off for booleans, and cannot tell a later validation step
// where a setting was written. For files that control automated repairs, an
// operator needs all of that, and every problem at once rather than one fix
// per run. So this package parses with yaml.v3 into a node tree and walks the
// tree against the target struct itself, reporting every problem with its
// line and column, and records where every setting was found so that
// validation can place its own problems just as precisely.
//
// Supported Go types: string (and named string types), bool, every signed and
// unsigned integer kind (range-checked), structs (keys from `yaml` tags, or
// the lower-cased field name), pointers, slices and maps with string keys.
// Anchors, aliases, merge keys, explicit tags and multiple documents are
// rejected: none is needed to write a config file, and aliases are how
// "billion laughs" documents blow up.
package yamlstrict

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Decode decodes the single YAML document in data into out, which must be a
// non-nil pointer to a struct. Settings absent from the document keep the
// value out already holds, so callers fill in defaults first; a list or map
// that is present replaces the default entirely.
//
// It returns every problem found (nil when there is none; use Errors.Err to
// turn them into an error) and the positions of the settings it decoded. The
// positions are nil when the document could not be walked at all (a syntax
// error, an empty file, several documents, a top level that is not a
// mapping): out then holds nothing from the document, and a validation step
// would only add noise.
//
// Decode never panics, whatever data holds.
func Decode(data []byte, out any) (pos *Positions, errs Errors) {
	rv := reflect.ValueOf(out)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, Errors{{Msg: fmt.Sprintf("internal error: yamlstrict.Decode needs a non-nil pointer, got %T", out)}}
	}

	root, perr := parse(data)
	if perr != nil {
		return nil, Errors{*perr}
	}
	if root.Kind != yaml.MappingNode {
		d := &decoder{}
		d.rejectSpecial(root, "")
		if len(d.errs) == 0 {
			d.errorf(root, "", "expected a mapping of settings at the top of the document, got %s; write the settings as key: value lines", describe(root))
		}
		return nil, d.errs
	}

	d := &decoder{fields: map[string]Pos{}}
	defer func() {
		// The walk is ours and is meant never to panic; if a bug makes it do
		// so, the operator still gets an error rather than a crashed process.
		if r := recover(); r != nil {
			pos = nil
			errs = append(d.errs, Error{Line: root.Line, Column: root.Column,
				Msg: fmt.Sprintf("internal error while decoding (a bug in stado; please report it): %v", r)})
		}
	}()
	d.value(root, rv.Elem(), "")
	return &Positions{fields: d.fields, root: Pos{root.Line, root.Column}}, d.errs
}

// parse returns the top node of the only document in data, or the problem
// that prevents decoding it. A null top node (a file holding only "---")
// counts as empty.
func parse(data []byte) (root *yaml.Node, problem *Error) {
	defer func() {
		// yaml.v3 turns its own failures into errors but a bug in it could
		// still panic; a config file must never crash the process.
		if r := recover(); r != nil {
			root = nil
			problem = &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("cannot parse this YAML (the YAML library failed: %v); check the file's syntax", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Line: 1, Column: 1, Msg: "the file is empty (no YAML document, only blank lines or comments); write the settings as key: value lines"}
		}
		e := syntaxError(data, err)
		return nil, &e
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Line: max(next.Line, 1), Column: max(next.Column, 1),
			Msg: "a second YAML document starts here; the file must hold exactly one document: remove this one or merge it into the first"}
	case !errors.Is(err, io.EOF):
		e := syntaxError(data, err)
		return nil, &e
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{Line: 1, Column: 1, Msg: "the file is empty (no YAML document); write the settings as key: value lines"}
	}
	root = doc.Content[0]
	if isNull(root) && root.Anchor == "" && root.Style&yaml.TaggedStyle == 0 {
		return nil, &Error{Line: max(root.Line, 1), Column: max(root.Column, 1),
			Msg: "the document is empty (it holds no settings); write the settings as key: value lines"}
	}
	return root, nil
}

// decoder walks one document. fields is nil when positions are not wanted.
type decoder struct {
	errs   Errors
	fields map[string]Pos
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, Error{Line: n.Line, Column: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) record(path string, key, val *yaml.Node) {
	if d.fields == nil {
		return
	}
	n := val
	if key != nil && (isNull(val) || (val.Kind != yaml.ScalarNode && val.Style&yaml.FlowStyle == 0)) {
		// A block collection starts inside its first item, and an empty
		// value has no text of its own: the key is the better place.
		n = key
	}
	d.fields[path] = Pos{n.Line, n.Column}
}

// rejectSpecial reports the YAML features this package refuses and returns
// true when n must not be decoded further. Aliases are never followed, which
// is what keeps a billion-laughs document from expanding: the walk visits
// each node of the parsed tree at most once.
func (d *decoder) rejectSpecial(n *yaml.Node, path string) bool {
	bad := false
	if n.Kind == yaml.AliasNode {
		d.errorf(n, path, "YAML aliases (*%s) are not supported; write the value out in full", n.Value)
		return true
	}
	if n.Anchor != "" {
		d.errorf(n, path, "YAML anchors (&%s) are not supported; remove the anchor and write values out in full", n.Anchor)
		bad = true
	}
	if n.Style&yaml.TaggedStyle != 0 {
		d.errorf(n, path, "YAML tag %s is not supported here; remove it (quote a value to make it a string)", truncate(n.Tag))
		bad = true
	}
	return bad
}

// value decodes n into v. path names v for messages and positions.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if d.rejectSpecial(n, path) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, v.Elem(), path)
	case reflect.Struct:
		d.structValue(n, v, path)
	case reflect.Map:
		d.mapValue(n, v, path)
	case reflect.Slice:
		d.sliceValue(n, v, path)
	case reflect.String:
		d.stringValue(n, v, path)
	case reflect.Bool:
		d.boolValue(n, v, path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		d.intValue(n, v, path)
	default:
		d.errorf(n, path, "internal error: cannot decode into Go type %s (a bug in stado; please report it)", v.Type())
	}
}

// field is one settable struct field and its YAML key.
type field struct {
	key   string
	index []int
}

// structFields lists the keys of a struct type, in declaration order (the
// order they are listed to an operator who misspelt one).
func structFields(t reflect.Type) []field {
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			// yaml.v3's rule, so a struct means the same to both decoders.
			name = strings.ToLower(sf.Name)
		}
		fs = append(fs, field{key: name, index: sf.Index})
	}
	return fs
}

func (d *decoder) structValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s; %s", describe(n), hintFor(n, path, "write its settings as indented key: value lines"))
		return
	}
	fields := structFields(v.Type())
	d.mapping(n, path, func(name string, key, val *yaml.Node, childPath string) {
		for _, f := range fields {
			if f.key == name {
				d.record(childPath, key, val)
				d.value(val, v.FieldByIndex(f.index), childPath)
				return
			}
		}
		known := make([]string, len(fields))
		for i, f := range fields {
			known[i] = f.key
		}
		msg := fmt.Sprintf("unknown key %s", quote(name))
		if s := suggest(name, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		if len(known) == 0 {
			msg += "; this mapping takes no keys"
		} else {
			msg += "; known keys: " + strings.Join(known, ", ")
		}
		d.errorf(key, childPath, "%s", msg)
	})
}

func (d *decoder) mapValue(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		d.errorf(n, path, "internal error: cannot decode into Go type %s (a bug in stado; please report it)", t)
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s; %s", describe(n), hintFor(n, path, "write its entries as indented key: value lines"))
		return
	}
	m := reflect.MakeMapWithSize(t, len(n.Content)/2)
	d.mapping(n, path, func(name string, key, val *yaml.Node, childPath string) {
		d.record(childPath, key, val)
		elem := reflect.New(t.Elem()).Elem()
		d.value(val, elem, childPath)
		m.SetMapIndex(reflect.ValueOf(name).Convert(t.Key()), elem)
	})
	v.Set(m)
}

// mapping checks the keys of a mapping node (each a plain scalar, none
// repeated, no merge keys) and calls fn once per valid, first-seen key.
func (d *decoder) mapping(n *yaml.Node, path string, fn func(name string, key, val *yaml.Node, childPath string)) {
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if d.rejectSpecial(key, path) {
			continue
		}
		if key.Kind != yaml.ScalarNode || isNull(key) {
			d.errorf(key, path, "expected a key name, got %s; keys must be plain names", describe(key))
			continue
		}
		if key.ShortTag() == "!!merge" {
			d.errorf(key, path, "YAML merge keys (<<) are not supported; write the keys out in full")
			continue
		}
		name := key.Value
		childPath := joinPath(path, name)
		if first, dup := seen[name]; dup {
			d.errorf(key, childPath, "duplicate key %s (first at %d:%d); remove one of them", quote(name), first.Line, first.Column)
			continue
		}
		seen[name] = key
		fn(name, key, val, childPath)
	}
}

func (d *decoder) sliceValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list, got %s; %s", describe(n),
			hintFor(n, path, `write a list: one "- item" line per entry, or [a, b]`))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		if d.fields != nil {
			d.fields[p] = Pos{item.Line, item.Column}
		}
		d.value(item, s.Index(i), p)
	}
	v.Set(s)
}

func (d *decoder) stringValue(n *yaml.Node, v reflect.Value, path string) {
	// Any scalar's text is accepted: policy_version: 2026-11-30 is meant as
	// text even though YAML reads it as a timestamp. Only "no value" is not.
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.errorf(n, path, "expected a string, got %s; %s", describe(n), hintFor(n, path, "write text, quoted if it contains special characters"))
		return
	}
	v.SetString(n.Value)
}

func (d *decoder) boolValue(n *yaml.Node, v reflect.Value, path string) {
	// Only YAML 1.2 booleans: yes/no/on/off are strings, so "pause: no" is a
	// mistake to report, not a value to guess at.
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		switch strings.ToLower(n.Value) {
		case "true":
			v.SetBool(true)
			return
		case "false":
			v.SetBool(false)
			return
		}
	}
	d.errorf(n, path, "expected a boolean, got %s; %s", describe(n), hintFor(n, path, "write true or false"))
}

func (d *decoder) intValue(n *yaml.Node, v reflect.Value, path string) {
	const hint = "write a whole number, e.g. 30"
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") {
		d.errorf(n, path, "expected an integer, got %s; %s", describe(n), hintFor(n, path, hint))
		return
	}
	i, ok, why := parseInt(n.Value)
	if !ok {
		if why == "" {
			d.errorf(n, path, "expected an integer, got %s; %s", describe(n), hint)
		} else {
			d.errorf(n, path, "%s", why)
		}
		return
	}
	if v.CanInt() {
		if !i.IsInt64() || v.OverflowInt(i.Int64()) {
			d.errorf(n, path, "%s", outOfRange(n.Value, i.Sign() < 0, v.Type().Bits(), true))
			return
		}
		v.SetInt(i.Int64())
		return
	}
	if i.Sign() < 0 {
		d.errorf(n, path, "number %s must not be negative; write a whole number of 0 or more", truncate(n.Value))
		return
	}
	if !i.IsUint64() || v.OverflowUint(i.Uint64()) {
		d.errorf(n, path, "%s", outOfRange(n.Value, false, v.Type().Bits(), false))
		return
	}
	v.SetUint(i.Uint64())
}

// outOfRange says a number does not fit its Go type. The limits of a small
// type are worth stating; those of a 64-bit one are not: no setting means
// them, and the validation step states the setting's real bounds once the
// number fits.
func outOfRange(lit string, negative bool, bits int, signed bool) string {
	word, fix := "large", "smaller"
	if negative {
		word, fix = "small", "larger"
	}
	msg := fmt.Sprintf("number %s is too %s for this setting", truncate(lit), word)
	if bits < 64 {
		switch {
		case !signed:
			msg += fmt.Sprintf(" (0 to %d)", uint64(math.MaxUint64>>(64-bits)))
		default:
			hi := int64(math.MaxInt64 >> (64 - bits))
			msg += fmt.Sprintf(" (%d to %d)", -hi-1, hi)
		}
	}
	return msg + "; write a " + fix + " number"
}

// parseInt reads a YAML integer the way yaml.v3 resolves one (sign,
// underscores, 0x/0o/0b prefixes) but exactly and without a size limit, so
// that a number too large for int64, which yaml.v3 resolves as a float, is
// reported as out of range rather than as "not an integer". A decimal with a
// leading zero is refused: YAML 1.1 reads 010 as octal 8, YAML 1.2 as 10, and
// a policy must not depend on which.
func parseInt(s string) (i *big.Int, ok bool, why string) {
	plain := strings.ReplaceAll(s, "_", "")
	digits := strings.TrimLeft(plain, "+-")
	if len(plain)-len(digits) > 1 {
		return nil, false, ""
	}
	if len(digits) > 1 && digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9' {
		return nil, false, fmt.Sprintf("number %s has a leading zero, which some YAML readers take for octal; write it without the leading zero", truncate(s))
	}
	if len(digits) > 70 {
		// Far past any integer type, and parsing a megabyte of digits
		// exactly would cost more than the answer is worth.
		return nil, false, outOfRange(s, strings.HasPrefix(plain, "-"), 64, true)
	}
	i, ok = new(big.Int).SetString(plain, 0)
	return i, ok, ""
}

// isNull reports whether n is YAML's null: empty, ~ or null.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "expected X, got Y" messages. Values are
// quoted (control characters escaped) and shortened: they come from a file
// that may be hostile and end up on an operator's terminal.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "no value (null)"
		case "!!str":
			return "string " + quote(n.Value)
		case "!!int":
			return "integer " + truncate(n.Value)
		case "!!float":
			return "number " + truncate(n.Value)
		case "!!bool":
			return "boolean " + truncate(n.Value)
		case "!!timestamp":
			return "timestamp " + truncate(n.Value)
		}
		return "value " + quote(n.Value)
	}
	return "an unknown YAML node"
}

// hintFor returns what to do about a wrong value: the general hint, or for a
// key written without a value, how to get the default instead.
func hintFor(n *yaml.Node, path, hint string) string {
	switch {
	case !isNull(n):
		return hint
	case strings.HasSuffix(path, "]"):
		return "write a value, or remove the entry"
	}
	return "write a value, or remove the key to take the default"
}

// quote renders s for a message: quoted, escaped, at most 60 characters.
func quote(s string) string {
	const maxRunes = 60
	if utf8.RuneCountInString(s) > maxRunes {
		r := []rune(s)
		return strconv.Quote(string(r[:maxRunes])) + "…"
	}
	return strconv.Quote(s)
}

// truncate renders an unquoted literal (a number, a boolean) for a message:
// as written when it is short, plain text, quoted like any value otherwise.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= 60 && !strings.ContainsAny(s, "\"\\") && strconv.CanBackquote(s) {
		return s
	}
	return quote(s)
}

// suggest returns the known key closest to name, if it is close enough to be
// a plausible typo.
func suggest(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		dist := editDistance(strings.ToLower(name), k)
		if bestDist < 0 || dist < bestDist {
			best, bestDist = k, dist
		}
	}
	limit := max(1, min(3, len(best)/3))
	if bestDist >= 0 && bestDist <= limit {
		return best
	}
	return ""
}

// editDistance is the optimal-string-alignment distance between a and b, in
// bytes: Levenshtein plus transposition of adjacent characters ("unti" for
// "unit" is one edit). Keys longer than a config key could plausibly be are
// not compared, so a hostile file cannot make this quadratic step expensive.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	// rows i-2, i-1 and i of the dynamic-programming table.
	pp := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}
