package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make demo, as a new user runs it: the planned repair in report mode, then
// the reconciled one in enforce-safe, and nothing left behind.
func TestMakeDemo(t *testing.T) {
	cmd := exec.Command("./scripts/demo.sh")
	cmd.Dir = filepath.Join("..")
	cmd.Env = append(cmdEnv(t), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	s := string(out)
	planned := strings.Index(s, "planned         restart  report mode: restart was planned but not executed")
	reconciled := strings.Index(s, "reconciled      restart  restart ran in")
	if planned < 0 || reconciled < planned {
		t.Fatalf("the demo did not show the planned and then the reconciled repair:\n%s", s)
	}
	if n := strings.Count(s, "$ stado optimize status"); n != 2 {
		t.Fatalf("status printed %d times, want after each tick", n)
	}
	if left, _ := filepath.Glob(filepath.Join(cmdTempDir(cmd), "stado-demo.*")); len(left) != 0 {
		t.Fatalf("the demo left %v behind", left)
	}
}
