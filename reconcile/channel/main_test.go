package channel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/reconcile/channel"
)

// serviceEnv makes the test binary act as the service under repair: an HTTP
// server in the directory the variable names (see serviceMain).
const serviceEnv = "STADO_CHANNEL_TEST_SERVICE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serviceEnv); dir != "" {
		os.Exit(serviceMain(dir))
	}
	os.Exit(m.Run())
}

// serviceMain is the service the ssh test restarts: it listens on the port
// in DIR/port (retrying while a predecessor still holds it), then writes its
// pid to DIR/pid and answers every request with "pid=N".
func serviceMain(dir string) int {
	port, err := os.ReadFile(filepath.Join(dir, "port"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	addr := "127.0.0.1:" + strings.TrimSpace(string(port))
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if i == 100 {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid := strconv.Itoa(os.Getpid())
	tmp := filepath.Join(dir, "pid.tmp"+pid)
	if err := os.WriteFile(tmp, []byte(pid+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Rename(tmp, filepath.Join(dir, "pid")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "pid=%s\n", pid)
	}))
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// testdata is the absolute path of a file in testdata/.
func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	leaseExpires = time.Date(2026, 11, 30, 12, 6, 0, 500_000_000, time.UTC)
	fenceInstant = time.Date(2026, 11, 30, 12, 5, 55, 500_000_000, time.UTC)
)

const (
	testToken        = "4f0c9e1a-7d4b-4c1e-9a2b-0d1e2f3a4b5c"
	wantExpiresEnv   = "2026-11-30T12:06:00.500000000Z"
	wantFenceEnv     = "2026-11-30T12:05:55.500000000Z"
	wantTokenEnvLine = "STADO_LEASE_TOKEN=" + testToken
)

// request is a restart of api.service on web-1 under a lease whose fence
// deadline is d from now.
func request(action string, d time.Duration) channel.Request {
	return channel.Request{
		Host: "web-1", Unit: "api.service", Service: "api", Action: action,
		Lease:    channel.LeaseInfo{Token: testToken, ExpiresAt: leaseExpires, FenceInstant: fenceInstant},
		Deadline: time.Now().Add(d),
	}
}

// testEnv is a small explicit base environment for the programs run.
func testEnv(extra ...string) []string {
	return append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/nonexistent"}, extra...)
}

// alive reports whether pid is a live process. A zombie is dead: it runs no
// code, and in a container whose init does not reap orphans it can linger.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

// waitDead fails the test unless pid is dead within d.
func waitDead(t *testing.T, what string, pid int, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(end) {
			t.Errorf("%s (pid %d) is still alive %v later", what, pid, d)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPid waits up to d for a file holding a pid and returns it.
func readPid(t *testing.T, path string, d time.Duration) int {
	t.Helper()
	end := time.Now().Add(d)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no pid in %s after %v (%v)", path, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noFile fails the test if path exists: the marker of something that must
// not have run.
func noFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (or cannot be checked: %v): something ran that must not have", path, err)
	}
}

// runResult is what a Run in a goroutine returned.
type runResult struct {
	res channel.Result
	err error
	at  time.Time
}

func runAsync(ctx context.Context, ch channel.Channel, req channel.Request) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		res, err := ch.Run(ctx, req)
		done <- runResult{res, err, time.Now()}
	}()
	return done
}
