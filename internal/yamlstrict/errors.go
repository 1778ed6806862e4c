package yamlstrict

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// MaxErrors is how many problems Errors.Err keeps. A hostile or badly broken
// file can produce one problem per line; past this many, the rest add nothing
// an operator can act on before fixing the first ones.
const MaxErrors = 100

// Pos is a place in a document: 1-based line and column (the column counts
// characters, as yaml.v3 does). The zero Pos means "no place in a document",
// for problems found in a value that was not decoded from one.
type Pos struct {
	Line, Column int
}

// IsZero reports whether p names no place.
func (p Pos) IsZero() bool { return p.Line == 0 && p.Column == 0 }

// String renders p as LINE:COL.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

// Error is one problem in a document.
type Error struct {
	// Line and Column locate the problem (1-based); both are 0 when the value
	// was not decoded from a document.
	Line, Column int
	// Path is the dotted path of the setting (circuit_breaker.failures,
	// services[2].host), or "" for the document as a whole.
	Path string
	// Msg says what is wrong and what to do about it.
	Msg string
}

// Pos returns where the problem is.
func (e Error) Pos() Pos { return Pos{e.Line, e.Column} }

// Error renders the problem as LINE:COL: PATH: MESSAGE. The position is left
// out when there is none and the path when it is empty; callers prefix the
// file name, which gives the FILE:LINE:COL: form editors jump to.
func (e Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one document. It is an error; its text is
// one problem per line.
type Errors []Error

// Error renders one problem per line, in the order held (Err sorts them).
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns nil when there is no problem, and otherwise the problems as an
// error: sorted by position (problems at the same place keep the order they
// were found in), at most MaxErrors of them plus one line saying how many more
// there are. Returning through Err avoids the typed-nil trap of returning an
// empty Errors as an error.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	sorted := append(Errors(nil), es...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	if len(sorted) > MaxErrors {
		next := sorted[MaxErrors]
		more := len(sorted) - MaxErrors
		sorted = append(sorted[:MaxErrors:MaxErrors], Error{
			Line: next.Line, Column: next.Column,
			Msg: fmt.Sprintf("%d more problems not shown; fix the ones above first", more),
		})
	}
	return sorted
}

// Positions records where every decoded setting was found, so that a
// validation step run after decoding can report its problems at the right
// place. Paths are dotted: circuit_breaker.failures, services[2].host,
// channels.exec.actions.restart.
//
// For a setting whose value is a scalar or a flow collection ([a, b], {a: 1})
// the value's position is recorded, since that is what a problem is about.
// For a block mapping or block list the key's position is recorded: the
// collection itself starts on a later line, inside its first item.
//
// A nil *Positions is valid and knows no position: every lookup answers the
// zero Pos, which Error renders without a place.
type Positions struct {
	fields map[string]Pos
	root   Pos
}

// Has reports whether path was present in the document.
func (p *Positions) Has(path string) bool {
	if p == nil {
		return false
	}
	_, ok := p.fields[path]
	return ok
}

// Of returns the position of path. A setting that was omitted has no place
// of its own, so it gets the position of its nearest present ancestor (the
// mapping it would have been written in), and finally the position of the
// document's top-level mapping.
func (p *Positions) Of(path string) Pos {
	if p == nil {
		return Pos{}
	}
	for path != "" {
		if pos, ok := p.fields[path]; ok {
			return pos
		}
		path = parentPath(path)
	}
	return p.root
}

// Errorf builds a problem about path, placed at Of(path).
func (p *Positions) Errorf(path, format string, args ...any) Error {
	pos := p.Of(path)
	return Error{Line: pos.Line, Column: pos.Column, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// parentPath strips the last element of a path: "a.b[2]" -> "a.b",
// "a.b" -> "a", "a" -> "".
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// joinPath appends a key to a path. A key that is not a plain name (one
// holding dots, brackets, spaces or unprintable characters, as a quoted YAML
// key can) is written quoted in brackets, so paths stay unambiguous and never
// carry raw control characters to a terminal.
func joinPath(parent, key string) string {
	if !plainKey(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune(`.[]"`, r) {
			return false
		}
	}
	return true
}

// OneLine renders err on one line for a refusal that must fit in a status
// line or a log record: when err holds Errors, the first shown problems
// separated by " | " and how many more there are; otherwise err's text.
func OneLine(err error, shown int) string {
	var es Errors
	if !errors.As(err, &es) {
		return err.Error()
	}
	parts := make([]string, 0, min(shown, len(es)))
	for i := 0; i < len(es) && i < shown; i++ {
		parts = append(parts, es[i].Error())
	}
	s := strings.Join(parts, " | ")
	if len(es) > shown {
		s += fmt.Sprintf(" | and %d more", len(es)-shown)
	}
	return s
}
