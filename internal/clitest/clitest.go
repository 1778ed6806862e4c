// Package clitest builds the stado binary once per test binary and runs it
// as an operator would, capturing its output and exit code.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds ./cmd/stado (once) and returns its path.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stado-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "stado")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/stado")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build ./cmd/stado: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binPath
}

// Result is one run of the binary.
type Result struct {
	Stdout string
	Stderr string
	Code   int
}

// Cmd describes one invocation.
type Cmd struct {
	Args  []string
	Env   []string // added to a minimal environment
	Stdin string
	Dir   string
}

// Run runs the binary and waits for it (at most two minutes).
func Run(tb testing.TB, c Cmd) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(tb), c.Args...)
	cmd.Env = append(BaseEnv(tb), c.Env...)
	cmd.Dir = c.Dir
	cmd.Stdin = strings.NewReader(c.Stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		tb.Fatalf("run stado %v: %v", c.Args, err)
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// BaseEnv is the environment every run starts from: PATH, and a HOME and
// XDG directories of the test's own so nothing leaks in from the machine.
func BaseEnv(tb testing.TB) []string {
	home := tb.TempDir()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"USER=operator",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}
