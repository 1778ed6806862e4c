package textdiff

import (
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedExact(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"both empty", "", "", ""},
		{"one changed line in the middle",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			"1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			"--- A\n+++ B\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"change at the start",
			"1\n2\n3\n4\n5\n",
			"one\n2\n3\n4\n5\n",
			"--- A\n+++ B\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n"},
		{"append at the end",
			"1\n2\n3\n4\n5\n",
			"1\n2\n3\n4\n5\n6\n",
			"--- A\n+++ B\n@@ -3,3 +3,4 @@\n 3\n 4\n 5\n+6\n"},
		{"from empty",
			"",
			"a\nb\n",
			"--- A\n+++ B\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty",
			"a\n",
			"",
			"--- A\n+++ B\n@@ -1 +0,0 @@\n-a\n"},
		{"two hunks when the gap exceeds twice the context",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			"x\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ny\n",
			"--- A\n+++ B\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+y\n"},
		{"two hunks when the gap is one more than twice the context",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			"x\n2\n3\n4\n5\n6\n7\n8\ny\n",
			"--- A\n+++ B\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -6,4 +6,4 @@\n 6\n 7\n 8\n-9\n+y\n"},
		{"one hunk when the gap is exactly twice the context",
			"1\n2\n3\n4\n5\n6\n7\n8\n",
			"x\n2\n3\n4\n5\n6\n7\ny\n",
			"--- A\n+++ B\n@@ -1,8 +1,8 @@\n-1\n+x\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+y\n"},
		{"missing final newline added",
			"a\nb",
			"a\nb\n",
			"--- A\n+++ B\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"comment edit in a policy",
			"policy_version: \"a\"\nmode: report   # safe\nkeep_runs: 10\n",
			"policy_version: \"b\"\nmode: report   # safe\nkeep_runs: 10\n",
			"--- A\n+++ B\n@@ -1,3 +1,3 @@\n-policy_version: \"a\"\n+policy_version: \"b\"\n mode: report   # safe\n keep_runs: 10\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Unified("A", []byte(tc.a), "B", []byte(tc.b))
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// lcs is the textbook dynamic program, the reference for minimality.
func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func randomLines(r *rand.Rand, n int, alphabet string) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = string(alphabet[r.Intn(len(alphabet))]) + "\n"
	}
	return lines
}

// TestScriptIsValidAndMinimal: on many random inputs the edit script
// rebuilds both sides and is exactly as short as the longest common
// subsequence allows.
func TestScriptIsValidAndMinimal(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 3000; iter++ {
		alphabet := "abcdefgh"[:1+r.Intn(8)]
		a := randomLines(r, r.Intn(40), alphabet)
		b := randomLines(r, r.Intn(40), alphabet)
		ops := script(a, b)
		var ra, rb []string
		edits := 0
		for _, o := range ops {
			switch o.kind {
			case opEqual:
				if a[o.a] != b[o.b] {
					t.Fatalf("kept lines differ: %q vs %q", a[o.a], b[o.b])
				}
				ra, rb = append(ra, a[o.a]), append(rb, b[o.b])
			case opDelete:
				ra = append(ra, a[o.a])
				edits++
			case opInsert:
				rb = append(rb, b[o.b])
				edits++
			}
		}
		if strings.Join(ra, "") != strings.Join(a, "") || strings.Join(rb, "") != strings.Join(b, "") {
			t.Fatalf("script does not rebuild the inputs\na=%q\nb=%q", a, b)
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("script has %d edits, minimum is %d\na=%q\nb=%q", edits, want, a, b)
		}
	}
}

var hunkRE = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// apply applies a unified diff to a, checking every context and deleted
// line against a at the place the hunk header names, as patch does.
func apply(t *testing.T, a []string, diff string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	if len(lines) < 2 || lines[0] != "--- A" || lines[1] != "+++ B" {
		t.Fatalf("bad headers in\n%s", diff)
	}
	var out []string
	pos := 0 // lines of a consumed
	i := 2
	for i < len(lines) {
		m := hunkRE.FindStringSubmatch(lines[i])
		if m == nil {
			t.Fatalf("expected a hunk header, got %q in\n%s", lines[i], diff)
		}
		num := func(s string, def int) int {
			if s == "" {
				return def
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		aStart, aCount := num(m[1], 0), num(m[2], 1)
		bStart, bCount := num(m[3], 0), num(m[4], 1)
		if aCount > 0 {
			aStart-- // to "lines before"
		}
		if bCount > 0 {
			bStart--
		}
		if aStart < pos {
			t.Fatalf("overlapping hunks in\n%s", diff)
		}
		out = append(out, a[pos:aStart]...)
		if len(out) != bStart {
			t.Fatalf("hunk %q: new side starts after %d lines, output has %d", lines[i], bStart, len(out))
		}
		pos = aStart
		i++
		gotA, gotB := 0, 0
		for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
			body := lines[i][1:] + "\n"
			if i+1 < len(lines) && lines[i+1] == `\ No newline at end of file` {
				body = lines[i][1:]
			}
			switch lines[i][0] {
			case ' ', '-':
				if pos >= len(a) || a[pos] != body {
					t.Fatalf("line %q does not match a[%d] in\n%s", lines[i], pos, diff)
				}
				pos++
				gotA++
				if lines[i][0] == ' ' {
					out = append(out, body)
					gotB++
				}
			case '+':
				out = append(out, body)
				gotB++
			default:
				t.Fatalf("bad line %q", lines[i])
			}
			i++
			if i < len(lines) && lines[i] == `\ No newline at end of file` {
				i++
			}
		}
		if gotA != aCount || gotB != bCount {
			t.Fatalf("hunk counts %d,%d but header says %d,%d in\n%s", gotA, gotB, aCount, bCount, diff)
		}
	}
	return append(out, a[pos:]...)
}

// TestUnifiedApplies: the diff, applied as patch would, turns a into b, and
// no hunk carries more than the context diff -u would give it.
func TestUnifiedApplies(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for iter := 0; iter < 2000; iter++ {
		a := randomLines(r, r.Intn(60), "abcdefghijklmnop")
		b := append([]string(nil), a...)
		for e := r.Intn(6); e > 0; e-- { // a few local edits, like a real policy change
			if len(b) > 0 && r.Intn(2) == 0 {
				k := r.Intn(len(b))
				b = append(b[:k], b[k+1:]...)
			} else {
				k := r.Intn(len(b) + 1)
				b = append(b[:k], append([]string{fmt.Sprintf("new %d\n", e)}, b[k:]...)...)
			}
		}
		if r.Intn(5) == 0 && len(b) > 0 {
			b[len(b)-1] = strings.TrimSuffix(b[len(b)-1], "\n")
		}
		diff := Unified("A", []byte(strings.Join(a, "")), "B", []byte(strings.Join(b, "")))
		if strings.Join(a, "") == strings.Join(b, "") {
			if diff != "" {
				t.Fatalf("equal inputs gave a diff:\n%s", diff)
			}
			continue
		}
		got := apply(t, a, diff)
		if strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("patched a is\n%q\nwant\n%q\ndiff:\n%s", got, b, diff)
		}
		// A hunk starts and ends with at most Context kept lines.
		for _, h := range strings.Split(diff, "\n@@")[1:] {
			body := strings.Split(h, "\n")[1:]
			lead := 0
			for lead < len(body) && strings.HasPrefix(body[lead], " ") {
				lead++
			}
			if lead > Context {
				t.Fatalf("hunk with %d leading context lines:\n%s", lead, diff)
			}
		}
	}
}

func TestLargeDisjointInputsAreFast(t *testing.T) {
	a := make([]string, 5000)
	b := make([]string, 5000)
	for i := range a {
		a[i] = fmt.Sprintf("a%d\n", i)
		b[i] = fmt.Sprintf("b%d\n", i)
	}
	d := Unified("A", []byte(strings.Join(a, "")), "B", []byte(strings.Join(b, "")))
	if !strings.HasPrefix(d, "--- A\n+++ B\n@@ -1,5000 +1,5000 @@\n-a0\n") {
		t.Errorf("unexpected diff head %q", d[:40])
	}
}
