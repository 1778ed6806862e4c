package main

import (
	"strings"
	"testing"

	"github.com/stado/stado/internal/clitest"
)

func TestVersionBinary(t *testing.T) {
	r := clitest.Run(t, clitest.Cmd{Args: []string{"version"}})
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "stado ") || !strings.Contains(r.Stdout, "\ncommit ") {
		t.Fatalf("stado version: code %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"no-such-command"}, {"version", "--no-such-flag"}, {"version", "extra"}, {"--log-format", "xml", "version"}} {
		r := clitest.Run(t, clitest.Cmd{Args: args})
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "stado: ") {
			t.Errorf("stado %v: code %d, stderr %q; want 2 and a one-line error", args, r.Code, r.Stderr)
		}
	}
}
