// Package textdiff owns the line diff stado shows operators before they
// replace a stored document (`stado optimize policy diff`, and the registry's
// equivalent): a unified diff in the format of `diff -u`, computed with
// Myers' O(ND) algorithm in its linear-space form, so a minimal diff costs
// memory proportional to the inputs whatever their difference.
package textdiff

import (
	"fmt"
	"strings"
)

// Context is how many unchanged lines surround each change, as in diff -u.
const Context = 3

// Unified returns the unified diff that turns a into b, headed
// "--- aName" and "+++ bName", or "" when a and b are equal. A last line with
// no newline is marked "\ No newline at end of file", as diff does, so that
// a change in the final newline alone is visible.
func Unified(aName string, a []byte, bName string, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	al, bl := splitLines(string(a)), splitLines(string(b))
	ops := script(al, bl)

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for _, h := range hunks(ops) {
		writeHunk(&out, h, al, bl)
	}
	return out.String()
}

// splitLines splits s after every newline; the last line lacks one when s
// does not end with one.
func splitLines(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// opKind is one step of an edit script.
type opKind byte

const (
	opEqual opKind = iota
	opDelete
	opInsert
)

// op is one line of the edit script: a line of a kept (a and b index it),
// deleted (a only) or inserted (b only).
type op struct {
	kind opKind
	a, b int
}

// script returns a shortest edit script from a to b, deletions before
// insertions within each change, as diff prints them.
func script(a, b []string) []op {
	// Compare small integers rather than strings in the inner loop.
	ids := map[string]int{}
	intern := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	m := &myers{a: intern(a), b: intern(b)}
	m.delA = make([]bool, len(a))
	m.insB = make([]bool, len(b))
	m.compare(0, len(a), 0, len(b))

	ops := make([]op, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && m.delA[i]:
			ops = append(ops, op{opDelete, i, j})
			i++
		case j < len(b) && m.insB[j]:
			ops = append(ops, op{opInsert, i, j})
			j++
		default:
			ops = append(ops, op{opEqual, i, j})
			i++
			j++
		}
	}
	return ops
}

// myers marks which lines of a are deleted and which lines of b inserted in a
// shortest edit script, by divide and conquer on the middle snake (Myers
// 1986, "An O(ND) Difference Algorithm and Its Variations", section 4b).
type myers struct {
	a, b       []int
	delA, insB []bool
	vf, vb     []int // furthest-reaching x per diagonal, reused across calls
}

// compare marks the edits between a[a0:a1] and b[b0:b1].
func (m *myers) compare(a0, a1, b0, b1 int) {
	for {
		for a0 < a1 && b0 < b1 && m.a[a0] == m.b[b0] {
			a0, b0 = a0+1, b0+1
		}
		for a0 < a1 && b0 < b1 && m.a[a1-1] == m.b[b1-1] {
			a1, b1 = a1-1, b1-1
		}
		switch {
		case a0 == a1:
			for j := b0; j < b1; j++ {
				m.insB[j] = true
			}
			return
		case b0 == b1:
			for i := a0; i < a1; i++ {
				m.delA[i] = true
			}
			return
		}
		// Both sides are non-empty and differ at both ends, so at least two
		// edits are needed and both halves below are strictly smaller.
		xs, ys, xe, ye := m.middleSnake(a0, a1, b0, b1)
		m.compare(a0, xs, b0, ys)
		a0, b0 = xe, ye // the snake itself is kept lines; loop on the rest
	}
}

// middleSnake returns the start and end of the middle snake of an optimal
// path from (a0,b0) to (a1,b1): a run of kept lines such that the path before
// it and the path after it each carry about half the edits.
func (m *myers) middleSnake(a0, a1, b0, b1 int) (xs, ys, xe, ye int) {
	n, mm := a1-a0, b1-b0
	delta := n - mm
	odd := delta&1 != 0
	dmax := (n + mm + 1) / 2
	off := dmax + 1
	size := 2*dmax + 3
	if cap(m.vf) < size {
		m.vf, m.vb = make([]int, size), make([]int, size)
	}
	vf, vb := m.vf[:size], m.vb[:size]
	// vf[k+off]: furthest x (from a0) on forward diagonal k = x - y.
	// vb[k+off]: furthest x counted back from a1 on reverse diagonal k.
	vf[off+1], vb[off+1] = 0, 0
	for d := 0; d <= dmax; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1] // down: an insertion
			} else {
				x = vf[off+k-1] + 1 // right: a deletion
			}
			y := x - k
			sx, sy := x, y
			for x < n && y < mm && m.a[a0+x] == m.b[b0+y] {
				x, y = x+1, y+1
			}
			vf[off+k] = x
			// The reverse diagonal that coincides with forward diagonal k.
			if kr := delta - k; odd && kr >= -(d-1) && kr <= d-1 && x+vb[off+kr] >= n {
				return a0 + sx, b0 + sy, a0 + x, b0 + y
			}
		}
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && vb[off+k-1] < vb[off+k+1]) {
				x = vb[off+k+1]
			} else {
				x = vb[off+k-1] + 1
			}
			y := x - k
			sx, sy := x, y
			for x < n && y < mm && m.a[a1-1-x] == m.b[b1-1-y] {
				x, y = x+1, y+1
			}
			vb[off+k] = x
			if kf := delta - k; !odd && kf >= -d && kf <= d && x+vf[off+kf] >= n {
				// In forward coordinates the reverse snake runs from
				// (n-x, mm-y) to (n-sx, mm-sy).
				return a1 - x, b1 - y, a1 - sx, b1 - sy
			}
		}
	}
	// Unreachable: a path of at most n+mm edits always exists. Splitting at
	// the start keeps the recursion correct should it ever be reached.
	return a0, b0, a0, b0
}

// hunk is a run of ops printed together: the changes and their context.
type hunk struct {
	ops            []op
	aStart, bStart int // lines of a and b before the hunk
}

// hunks groups the changes of ops with Context lines around each; changes
// separated by at most 2*Context kept lines share a hunk, as in diff -u.
func hunks(ops []op) []hunk {
	var hs []hunk
	for i := 0; i < len(ops); {
		if ops[i].kind == opEqual {
			i++
			continue
		}
		start := max(0, i-Context)
		end := i // one past the last change of this hunk
		for j := i; j < len(ops); j++ {
			if ops[j].kind != opEqual {
				end = j + 1
				continue
			}
			if j-end >= 2*Context {
				break
			}
		}
		stop := min(len(ops), end+Context)
		hs = append(hs, hunk{ops: ops[start:stop], aStart: ops[start].a, bStart: ops[start].b})
		i = stop
	}
	return hs
}

func writeHunk(out *strings.Builder, h hunk, a, b []string) {
	aCount, bCount := 0, 0
	for _, o := range h.ops {
		if o.kind != opInsert {
			aCount++
		}
		if o.kind != opDelete {
			bCount++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(h.aStart, aCount), hunkRange(h.bStart, bCount))
	for _, o := range h.ops {
		switch o.kind {
		case opEqual:
			writeLine(out, ' ', a[o.a])
		case opDelete:
			writeLine(out, '-', a[o.a])
		case opInsert:
			writeLine(out, '+', b[o.b])
		}
	}
}

// hunkRange renders one side of a hunk header as diff -u does: "L,N"; just
// "L" when N is 1; and, for an empty side, the line before the hunk with ",0".
func hunkRange(before, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, count)
}

func writeLine(out *strings.Builder, prefix byte, line string) {
	out.WriteByte(prefix)
	out.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}
