package yamlstrict

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Failures int    `yaml:"failures"`
	Name     string `yaml:"name"`
}

type svc struct {
	Host string `yaml:"host"`
	Unit string `yaml:"unit"`
}

type label string

type doc struct {
	Version  string              `yaml:"version"`
	Label    label               `yaml:"label"`
	Pause    bool                `yaml:"pause"`
	N        int                 `yaml:"n"`
	N64      int64               `yaml:"n64"`
	U8       uint8               `yaml:"u8"`
	I8       int8                `yaml:"i8"`
	List     []string            `yaml:"list"`
	Inner    inner               `yaml:"inner"`
	Ptr      *inner              `yaml:"ptr,omitempty"`
	Services []svc               `yaml:"services"`
	Actions  map[string][]string `yaml:"actions"`
	Skipped  string              `yaml:"-"`
	Untagged int
	hidden   int
}

const docKeys = "known keys: version, label, pause, n, n64, u8, i8, list, inner, ptr, services, actions, untagged"

func decodeErr(t *testing.T, in string) string {
	t.Helper()
	var d doc
	_, errs := Decode([]byte(in), &d)
	err := errs.Err()
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDecodeErrors pins every kind of problem, its exact position and its
// exact text.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"unknown key", "n: 1\nbogus: 2\n",
			`2:1: bogus: unknown key "bogus"; ` + docKeys},
		{"unknown key with suggestion", "inner:\n  failure: 3\n",
			`2:3: inner.failure: unknown key "failure" (did you mean "failures"?); known keys: failures, name`},
		{"unknown key in list item", "services:\n  - host: a\n    unti: b\n",
			`3:5: services[0].unti: unknown key "unti" (did you mean "unit"?); known keys: host, unit`},
		{"dash key is not a key", "Skipped: x\n",
			`1:1: Skipped: unknown key "Skipped"; ` + docKeys},
		{"unknown key that is not a plain name", "\"a.b\\e\": 1\n",
			`1:1: ["a.b\x1b"]: unknown key "a.b\x1b"; ` + docKeys},
		{"wrong type string for int", "n: ten\n",
			`1:4: n: expected an integer, got string "ten"; write a whole number, e.g. 30`},
		{"quoted number for int", "n: \"10\"\n",
			`1:4: n: expected an integer, got string "10"; write a whole number, e.g. 30`},
		{"float for int", "n: 1.5\n",
			`1:4: n: expected an integer, got number 1.5; write a whole number, e.g. 30`},
		{"list for int", "n: [1]\n",
			`1:4: n: expected an integer, got a list; write a whole number, e.g. 30`},
		{"null for int", "n:\n",
			`1:3: n: expected an integer, got no value (null); write a value, or remove the key to take the default`},
		{"yes is not a bool", "pause: yes\n",
			`1:8: pause: expected a boolean, got string "yes"; write true or false`},
		{"int is not a bool", "pause: 1\n",
			`1:8: pause: expected a boolean, got integer 1; write true or false`},
		{"mapping for string", "version: {a: 1}\n",
			`1:10: version: expected a string, got a mapping; write text, quoted if it contains special characters`},
		{"null for string", "version: ~\n",
			`1:10: version: expected a string, got no value (null); write a value, or remove the key to take the default`},
		{"scalar for list", "list: a\n",
			`1:7: list: expected a list, got string "a"; write a list: one "- item" line per entry, or [a, b]`},
		{"null list item", "list: [a, ~]\n",
			`1:11: list[1]: expected a string, got no value (null); write a value, or remove the entry`},
		{"scalar for struct", "inner: 5\n",
			`1:8: inner: expected a mapping, got integer 5; write its settings as indented key: value lines`},
		{"list for map", "actions: [a]\n",
			`1:10: actions: expected a mapping, got a list; write its entries as indented key: value lines`},
		{"number in a string list is its text", "actions:\n  restart: [a, 2]\n",
			""},
		{"wrong type deep in list of structs", "services:\n  - host: a\n  - host: [x]\n",
			`3:11: services[1].host: expected a string, got a list; write text, quoted if it contains special characters`},
		{"int overflow int64", "n64: 99999999999999999999\n",
			`1:6: n64: number 99999999999999999999 is too large for this setting; write a smaller number`},
		{"int underflow int64", "n64: -9223372036854775809\n",
			`1:6: n64: number -9223372036854775809 is too small for this setting; write a larger number`},
		{"int64 limits fit", "n64: -9223372036854775808\nn: 9223372036854775807\n",
			""},
		{"int overflow int8", "i8: -129\n",
			`1:5: i8: number -129 is too small for this setting (-128 to 127); write a larger number`},
		{"uint overflow", "u8: 256\n",
			`1:5: u8: number 256 is too large for this setting (0 to 255); write a smaller number`},
		{"uint negative", "u8: -1\n",
			`1:5: u8: number -1 must not be negative; write a whole number of 0 or more`},
		{"huge literal", "n: " + strings.Repeat("9", 100) + "\n",
			`1:4: n: number "` + strings.Repeat("9", 60) + `"… is too large for this setting; write a smaller number`},
		{"leading zero", "n: 010\n",
			`1:4: n: number 010 has a leading zero, which some YAML readers take for octal; write it without the leading zero`},
		{"duplicate key", "n: 1\npause: true\nn: 2\n",
			`3:1: n: duplicate key "n" (first at 1:1); remove one of them`},
		{"duplicate key nested", "inner:\n  name: a\n  name: b\n",
			`3:3: inner.name: duplicate key "name" (first at 2:3); remove one of them`},
		{"duplicate map key", "actions:\n  restart: [a]\n  restart: [b]\n",
			`3:3: actions.restart: duplicate key "restart" (first at 2:3); remove one of them`},
		{"empty file", "",
			`1:1: the file is empty (no YAML document, only blank lines or comments); write the settings as key: value lines`},
		{"comments only", "# nothing here\n\n",
			`1:1: the file is empty (no YAML document, only blank lines or comments); write the settings as key: value lines`},
		{"document marker only", "---\n",
			`2:1: the document is empty (it holds no settings); write the settings as key: value lines`},
		{"top level list", "- a\n",
			`1:1: expected a mapping of settings at the top of the document, got a list; write the settings as key: value lines`},
		{"top level scalar", "hello\n",
			`1:1: expected a mapping of settings at the top of the document, got string "hello"; write the settings as key: value lines`},
		{"two documents", "n: 1\n---\nn: 2\n",
			`2:1: a second YAML document starts here; the file must hold exactly one document: remove this one or merge it into the first`},
		{"two documents, second broken", "n: 1\n---\n: : :\n",
			`3:1: invalid YAML: did not find expected key; check the indentation (spaces only) and the quoting on this line and the lines just before it`},
		{"tab indentation", "n: 1\ninner:\n\tname: x\n",
			`3:1: tab character in the indentation; YAML indents with spaces only: replace the tab with spaces`},
		{"tab after spaces", "inner:\n  name: x\n  \tfailures: 2\n",
			`3:3: tab character in the indentation; YAML indents with spaces only: replace the tab with spaces`},
		{"tab before a comment", "n: 1\n\t# comment\n",
			`2:1: tab character in the indentation; YAML indents with spaces only: replace the tab with spaces`},
		{"tab on a blank line", "n: 1\n\t\npause: true\n",
			`2:1: tab character in the indentation; YAML indents with spaces only: replace the tab with spaces`},
		{"tab between key and value is fine", "n:\t1\n",
			""},
		{"syntax error first line", "n: b: c\n",
			`1:1: invalid YAML: mapping values are not allowed in this context; check the indentation (spaces only) and the quoting on this line and the lines just before it`},
		{"syntax error later line", "n: 1\n  pause: 2\n",
			`2:1: invalid YAML: mapping values are not allowed in this context; check the indentation (spaces only) and the quoting on this line and the lines just before it`},
		{"parser error line corrected", "n: [1, 2\npause: true\n",
			`2:1: invalid YAML: did not find expected ',' or ']'; check the indentation (spaces only) and the quoting on this line and the lines just before it`},
		{"bad dedent", "list:\n  - a\n - b\n",
			`3:1: invalid YAML: did not find expected key; check the indentation (spaces only) and the quoting on this line and the lines just before it`},
		{"unterminated quote, at the line it opens", "n: 1\nversion: 'abc\n",
			`2:1: invalid YAML: found unexpected end of stream; check the indentation (spaces only) and the quoting on this line and the lines just before it`},
		{"control character", "n: 1\nversion: a\x01b\n",
			`2:11: character U+0001 is not allowed in YAML; remove it`},
		{"invalid utf-8", "n: 1\nversion: caf\xe9\n",
			`2:13: invalid UTF-8 (byte 0xE9); save the file as UTF-8 text`},
		{"anchor and alias", "inner: &base {name: a}\nptr: *base\n",
			"1:8: inner: YAML anchors (&base) are not supported; remove the anchor and write values out in full\n" +
				"2:6: ptr: YAML aliases (*base) are not supported; write the value out in full"},
		{"undefined alias", "n: 1\nversion: *nope\n",
			`2:10: YAML alias *nope refers to no anchor; aliases are not supported here: write the value out in full`},
		{"merge key", "inner:\n  <<: {name: a}\n",
			`2:3: inner: YAML merge keys (<<) are not supported; write the keys out in full`},
		{"explicit tag", "n: !!str 10\n",
			`1:4: n: YAML tag !!str is not supported here; remove it (quote a value to make it a string)`},
		{"complex key", "? [a]\n: 1\n",
			`1:3: expected a key name, got a list; keys must be plain names`},
		{"null key", "~: 1\n",
			`1:1: expected a key name, got no value (null); keys must be plain names`},
		{"many errors sorted by position", "pause: no\nn: x\ninner:\n  failures: y\n  nope: 1\nn64: 1.0\n",
			"1:8: pause: expected a boolean, got string \"no\"; write true or false\n" +
				"2:4: n: expected an integer, got string \"x\"; write a whole number, e.g. 30\n" +
				"4:13: inner.failures: expected an integer, got string \"y\"; write a whole number, e.g. 30\n" +
				"5:3: inner.nope: unknown key \"nope\"; known keys: failures, name\n" +
				"6:6: n64: expected an integer, got number 1.0; write a whole number, e.g. 30"},
		{"valid", "version: 2026-11-30\nlabel: x\npause: false\nn: 1_000\nn64: -0x10\nu8: 255\ni8: -128\nlist: []\ninner: {failures: 3}\nptr: {name: p}\nservices: [{host: a, unit: b}]\nactions: {restart: [a, \"{unit}\"]}\nuntagged: 7\n",
			""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeErr(t, tc.in)
			if got != tc.want {
				t.Errorf("input %q\n got: %s\nwant: %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	d := doc{
		Version: "default", N: 42, List: []string{"default-1", "default-2"},
		Inner:   inner{Failures: 4, Name: "keep"},
		Actions: map[string][]string{"default": {"x"}},
	}
	in := "version: 2026-11-30\nlabel: lbl\npause: true\nn64: -0x10\nu8: 255\ni8: -128\n" +
		"list: [\"*\"]\ninner:\n  failures: 7\nptr:\n  name: p\n" +
		"services:\n  - host: web-1\n    unit: api.service\n  - {host: web-2, unit: db.service}\n" +
		"actions:\n  restart: [sudo, systemctl, restart, \"{unit}\"]\nuntagged: 7\n"
	pos, errs := Decode([]byte(in), &d)
	if err := errs.Err(); err != nil {
		t.Fatal(err)
	}
	want := doc{
		Version: "2026-11-30", Label: "lbl", Pause: true,
		N:   42, // omitted: keeps the value it had
		N64: -16, U8: 255, I8: -128,
		List:  []string{"*"},                    // present: replaces the default list
		Inner: inner{Failures: 7, Name: "keep"}, // omitted field keeps its value
		Ptr:   &inner{Name: "p"},
		Services: []svc{
			{Host: "web-1", Unit: "api.service"},
			{Host: "web-2", Unit: "db.service"},
		},
		Actions:  map[string][]string{"restart": {"sudo", "systemctl", "restart", "{unit}"}}, // replaced
		Untagged: 7,
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("decoded\n %+v\nwant\n %+v", d, want)
	}

	// Positions: scalar values at the value, block collections at the key,
	// flow collections at their opening bracket, list items at the item,
	// omitted settings at the nearest present ancestor.
	positions := []struct {
		path string
		want Pos
		has  bool
	}{
		{"version", Pos{1, 10}, true},
		{"pause", Pos{3, 8}, true},
		{"list", Pos{7, 7}, true},
		{"list[0]", Pos{7, 8}, true},
		{"inner", Pos{8, 1}, true},
		{"inner.failures", Pos{9, 13}, true},
		{"inner.name", Pos{8, 1}, false},
		{"ptr", Pos{10, 1}, true},
		{"ptr.name", Pos{11, 9}, true},
		{"ptr.failures", Pos{10, 1}, false},
		{"services", Pos{12, 1}, true},
		{"services[0]", Pos{13, 5}, true},
		{"services[0].unit", Pos{14, 11}, true},
		{"services[1]", Pos{15, 5}, true},
		{"services[1].host", Pos{15, 12}, true},
		{"services[7].host", Pos{12, 1}, false},
		{"actions.restart", Pos{17, 12}, true},
		{"actions.restart[3]", Pos{17, 39}, true},
		{"n", Pos{1, 1}, false}, // omitted top-level: the top mapping
		{"", Pos{1, 1}, false},
	}
	for _, p := range positions {
		if got := pos.Of(p.path); got != p.want {
			t.Errorf("Of(%q) = %v, want %v", p.path, got, p.want)
		}
		if got := pos.Has(p.path); got != p.has {
			t.Errorf("Has(%q) = %v, want %v", p.path, got, p.has)
		}
	}
	e := pos.Errorf("inner.name", "must not be %q", "keep")
	if e.Error() != `8:1: inner.name: must not be "keep"` {
		t.Errorf("Errorf: %s", e)
	}
}

func TestUnexportedFieldIsNotAKey(t *testing.T) {
	var d doc
	_, errs := Decode([]byte("hidden: 5\n"), &d)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Msg, `unknown key "hidden"`) || d.hidden != 0 {
		t.Errorf("errors %v, hidden %d", errs, d.hidden)
	}
}

func TestRootPositionAfterComments(t *testing.T) {
	var d doc
	pos, errs := Decode([]byte("# header\n\n  n: 1\n"), &d)
	if errs != nil {
		t.Fatal(errs.Err())
	}
	if got := pos.Of("version"); got != (Pos{3, 3}) {
		t.Errorf("omitted top-level setting at %v, want the top mapping at 3:3", got)
	}
}

func TestNilPositions(t *testing.T) {
	var p *Positions
	if p.Has("a") || !p.Of("a.b").IsZero() {
		t.Error("nil Positions must know nothing")
	}
	if got := p.Errorf("a.b", "bad").Error(); got != "a.b: bad" {
		t.Errorf("error without position renders as %q", got)
	}
}

func TestDocumentLevelFailuresReturnNoPositions(t *testing.T) {
	for _, in := range []string{"", "---\n", "- a\n", "a: b: c\n", "n: 1\n---\nn: 2\n"} {
		var d doc
		pos, errs := Decode([]byte(in), &d)
		if pos != nil || len(errs) == 0 {
			t.Errorf("%q: positions %v, errors %v; want nil positions and an error", in, pos, errs)
		}
	}
	var d doc
	if pos, _ := Decode([]byte("n: x\n"), &d); pos == nil {
		t.Error("a field error must still return positions")
	}
}

func TestDecodeNeedsPointer(t *testing.T) {
	for _, out := range []any{nil, doc{}, (*doc)(nil)} {
		pos, errs := Decode([]byte("n: 1\n"), out)
		if pos != nil || len(errs) != 1 || !strings.Contains(errs[0].Msg, "non-nil pointer") {
			t.Errorf("Decode into %T: %v %v", out, pos, errs)
		}
	}
}

func TestUnsupportedTypeIsAnErrorNotAPanic(t *testing.T) {
	var v struct {
		F float64 `yaml:"f"`
		M map[int]string
	}
	_, errs := Decode([]byte("f: 1.5\nm: {1: a}\n"), &v)
	got := errs.Err().Error()
	want := "1:4: f: internal error: cannot decode into Go type float64 (a bug in stado; please report it)\n" +
		"2:4: m: internal error: cannot decode into Go type map[int]string (a bug in stado; please report it)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestBillionLaughs: aliases are rejected without being expanded, so a
// document that would expand to 10^9 nodes is answered at once.
func TestBillionLaughs(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b.WriteString(name + ": &" + name + " [")
		for i := 0; i < 9; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("*" + prev)
		}
		b.WriteString("]\n")
		prev = name
	}
	var v struct {
		A, B, C, D, E, F, G, H, I []string
	}
	start := time.Now()
	_, errs := Decode([]byte(b.String()), &v)
	if time.Since(start) > 2*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	// One anchor per line; an anchored node is not walked into, so none of
	// the aliases is even visited.
	if len(errs) != 9 {
		t.Fatalf("got %d errors, want 9:\n%v", len(errs), errs.Err())
	}
	for _, e := range errs {
		if !strings.HasPrefix(e.Msg, "YAML anchors (&") {
			t.Fatalf("unexpected error %v", e)
		}
	}
}

// TestSelfReferencingAlias: an alias inside its own anchor makes the node
// tree cyclic; the walk must not follow it.
func TestSelfReferencingAlias(t *testing.T) {
	var v struct {
		A []any `yaml:"a"`
	}
	_, errs := Decode([]byte("a: &x [*x]\n"), &v)
	if errs.Err() == nil {
		t.Fatal("want an error")
	}
}

func TestErrCapsAndSorts(t *testing.T) {
	var es Errors
	for i := MaxErrors + 5; i > 0; i-- {
		es = append(es, Error{Line: i, Column: 1, Msg: "x"})
	}
	err := es.Err()
	var got Errors
	if !errors.As(err, &got) {
		t.Fatalf("Err returned %T", err)
	}
	if len(got) != MaxErrors+1 {
		t.Fatalf("got %d entries, want %d", len(got), MaxErrors+1)
	}
	for i := 0; i < MaxErrors; i++ {
		if got[i].Line != i+1 {
			t.Fatalf("entry %d at line %d: not sorted", i, got[i].Line)
		}
	}
	if last := got[MaxErrors]; last.Line != MaxErrors+1 || last.Msg != "5 more problems not shown; fix the ones above first" {
		t.Errorf("summary entry: %v", last)
	}
	if Errors(nil).Err() != nil {
		t.Error("no problems must give a nil error")
	}
	if len(es) != MaxErrors+5 || es[0].Line != MaxErrors+5 {
		t.Error("Err must not reorder or truncate its receiver")
	}
}

func TestStableOrderAtSamePosition(t *testing.T) {
	es := Errors{{Line: 2, Column: 1, Msg: "b"}, {Line: 1, Column: 9, Msg: "a2"}, {Line: 1, Column: 1, Msg: "a"}, {Line: 2, Column: 1, Msg: "c"}}
	if got := es.Err().Error(); got != "1:1: a\n1:9: a2\n2:1: b\n2:1: c" {
		t.Errorf("got %q", got)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"decision_ttl_seconds", "mode", "keep_runs"}
	for in, want := range map[string]string{
		"decision_ttl_second": "decision_ttl_seconds",
		"Mode":                "mode",
		"mod":                 "mode",
		"keep-runs":           "keep_runs",
		"colour":              "",
		"x":                   "",
	} {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

var errLineRE = regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*: `)

// FuzzDecode: whatever the input, Decode must not panic, and every problem
// it reports must have a position in the document.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"n: 1\n", "n: ten\n", "a: &a [*a]\n", "inner:\n\tname: x\n", "- a\n", "",
		"services:\n  - host: a\n    unit: b\n", "actions: {a: [b]}\n", "n: 1\n---\nn: 2\n",
		"u8: 0x1ff\ni8: -0b1\nn64: 1_0\n", "\"\\e\": 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d doc
		// The fuzzer has no per-input timeout; turn a hang into a crash that
		// names the input.
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				panic(fmt.Sprintf("HANG %q", data))
			}
		}()
		pos, errs := Decode(data, &d)
		close(done)
		for _, e := range errs {
			if !errLineRE.MatchString(e.Error()) {
				t.Fatalf("problem without a position: %q", e.Error())
			}
		}
		if pos == nil && len(errs) == 0 {
			t.Fatal("no positions and no problems")
		}
	})
}
