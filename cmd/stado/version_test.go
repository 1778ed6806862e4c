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
	for _, args := range [][]string{{"no-such-command"}, {"version", "--no-such-flag"}, {"version", "extra"}, {"--log-format", "xml", "version"}, {"optimize", "serve", "--schedule", "every minute"}, {"optimize", "history", "--limit", "0"}} {
		r := clitest.Run(t, clitest.Cmd{Args: args})
		if r.Code != 2 || !strings.HasPrefix(r.Stderr, "stado: ") {
			t.Errorf("stado %v: code %d, stderr %q; want 2 and a one-line error", args, r.Code, r.Stderr)
		}
	}
}

func TestCompletionAndLogFormats(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := clitest.Run(t, clitest.Cmd{Args: []string{"completion", shell}})
		if r.Code != 0 || !strings.Contains(r.Stdout, "stado") || len(r.Stdout) < 500 {
			t.Errorf("completion %s: code %d, %d bytes", shell, r.Code, len(r.Stdout))
		}
	}
	// -v logs at info, as JSON when asked: every stderr line is a JSON object.
	dir := t.TempDir()
	r := clitest.Run(t, clitest.Cmd{Args: []string{"--store", dir, "--log-format", "json", "-vv", "optimize", "run"}})
	if r.Code != 0 {
		t.Fatalf("run: %d %s", r.Code, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if len(lines) < 2 || !strings.Contains(r.Stderr, `"msg":"tick done"`) || !strings.Contains(r.Stderr, `"level":"DEBUG"`) {
		t.Fatalf("-vv --log-format json logged %q", r.Stderr)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("not a JSON log line: %q", line)
		}
	}
}
