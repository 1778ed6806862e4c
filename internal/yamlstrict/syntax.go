package yamlstrict

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// yaml.v3 reports a syntax error as text only: "yaml: line N: problem", or
// "yaml: problem" when the problem is on the first line or has no line.
var yamlErrRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// parserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. For those, yaml.v3 prints the 0-based line of the mark,
// one less than the line an editor shows; scanner errors print the 1-based
// line. The list is every message yaml.v3 v3.0.1's parserc.go can set.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// syntaxError turns a yaml.v3 parse error into an Error with the best
// position that can be recovered: yaml.v3 gives a line for most problems and
// never a column, so the problems an operator makes most (a tab in the
// indentation, a stray control character) are located in data directly.
func syntaxError(data []byte, err error) Error {
	text := err.Error()
	line, problem := 0, text
	if m := yamlErrRE.FindStringSubmatch(text); m != nil {
		problem = m[2]
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
		}
		if parserProblems[problem] {
			line++
		}
	}
	line = max(line, 1)

	switch {
	case strings.Contains(problem, "tab character") || strings.Contains(problem, "cannot start any token"):
		if l, c, ok := findIndentTab(data, line); ok {
			return Error{Line: l, Column: c, Msg: "tab character in the indentation; YAML indents with spaces only: replace the tab with spaces"}
		}
	case strings.Contains(problem, "control characters") || strings.Contains(problem, "UTF-8") ||
		strings.Contains(problem, "Unicode character") || strings.Contains(problem, "UTF-16") ||
		strings.Contains(problem, "surrogate"):
		if e, ok := findBadChar(data); ok {
			return e
		}
	case strings.HasPrefix(problem, "unknown anchor "):
		name := strings.TrimSuffix(strings.TrimPrefix(problem, "unknown anchor '"), "' referenced")
		l, c := locate(data, "*"+name)
		return Error{Line: l, Column: c, Msg: fmt.Sprintf("YAML alias *%s refers to no anchor; aliases are not supported here: write the value out in full", name)}
	case strings.HasPrefix(problem, "exceeded max depth"):
		return Error{Line: line, Column: 1, Msg: "the document nests collections more than 10000 levels deep; no stado file needs that: fix the brackets or indentation"}
	}
	return Error{Line: line, Column: 1, Msg: fmt.Sprintf("invalid YAML: %s; check the indentation (spaces only) and the quoting on this line and the lines just before it", problem)}
}

// findIndentTab finds a tab in the leading whitespace of a line, preferring
// the line yaml.v3 named and the one after it (yaml.v3 sometimes names the
// line before the tab), else the first such line up to it.
func findIndentTab(data []byte, near int) (line, col int, ok bool) {
	lines := bytes.Split(data, []byte("\n"))
	check := func(i int) (int, bool) {
		if i < 0 || i >= len(lines) {
			return 0, false
		}
		l := lines[i]
		for j, ch := range l {
			switch ch {
			case ' ':
				continue
			case '\t':
				// yaml.v3 refuses a tab even on an otherwise blank line.
				return utf8.RuneCount(l[:j]) + 1, true
			}
			return 0, false
		}
		return 0, false
	}
	for _, i := range []int{near - 1, near} {
		if c, ok := check(i); ok {
			return i + 1, c, true
		}
	}
	for i := 0; i < near && i < len(lines); i++ {
		if c, ok := check(i); ok {
			return i + 1, c, true
		}
	}
	return 0, 0, false
}

// findBadChar finds the first byte sequence in data that YAML does not allow:
// invalid UTF-8, or a control character other than tab, LF and CR (YAML 1.2
// §5.1, the printable set yaml.v3's reader enforces).
func findBadChar(data []byte) (Error, bool) {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return Error{Line: line, Column: col, Msg: fmt.Sprintf("invalid UTF-8 (byte 0x%02X); save the file as UTF-8 text", data[i])}, true
		}
		if !yamlAllowed(r) {
			return Error{Line: line, Column: col, Msg: fmt.Sprintf("character %U is not allowed in YAML; remove it", r)}, true
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return Error{}, false
}

// yamlAllowed is the character set yaml.v3's reader accepts.
func yamlAllowed(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0x7E) || r == 0x85 ||
		(r >= 0xA0 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// locate returns the 1-based line and column of the first occurrence of s in
// data, or 1:1 when it does not occur.
func locate(data []byte, s string) (line, col int) {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 1, 1
	}
	before := data[:i]
	line = bytes.Count(before, []byte("\n")) + 1
	if nl := bytes.LastIndexByte(before, '\n'); nl >= 0 {
		before = before[nl+1:]
	}
	return line, utf8.RuneCount(before) + 1
}
