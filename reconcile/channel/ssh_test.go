package channel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/internal/sshtest"
	"github.com/stado/stado/reconcile/channel"
)

func sshRequest(action string, d time.Duration) channel.Request {
	req := request(action, d)
	req.Host = "127.0.0.1"
	return req
}

// getPid asks the service which process answered.
func getPid(t *testing.T, port int) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatalf("the service does not answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

// TestSSHRestartsRealService restarts a real service process through a real
// sshd: the restart action arrives with every argument intact (quoted for
// the remote shell), the lease variables arrive on the remote side, and the
// service answers again from a new process.
func TestSSHRestartsRealService(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := sshtest.FreePort(t)
	for name, v := range map[string]string{"bin": bin, "port": strconv.Itoa(port)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first := exec.Command(bin)
	first.Env = append(os.Environ(), serviceEnv+"="+dir)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = first.Wait() }()
	t.Cleanup(func() { _ = first.Process.Kill() })
	readPid(t, filepath.Join(dir, "pid"), 10*time.Second)
	before := getPid(t, port)
	if before != fmt.Sprintf("pid=%d", first.Process.Pid) {
		t.Fatalf("the service answered %q, want pid=%d", before, first.Process.Pid)
	}

	// Words a remote shell would act on if they were not quoted.
	marker := filepath.Join(dir, "injected")
	note := fmt.Sprintf(`it's a "note" $(touch %s) `+"`touch %s`"+` \ ; | & * ~`, marker, marker)
	ch, err := channel.NewSSH(srv.Config(map[string][]string{
		"restart": {"/bin/sh", testdata(t, "restart-service.sh"), dir, "{unit}", note},
	}), channel.Options{Env: testEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Name() != "ssh" || !ch.Has("restart") || ch.Has("check") {
		t.Fatalf("Name/Has: %q restart=%v check=%v", ch.Name(), ch.Has("restart"), ch.Has("check"))
	}
	req := sshRequest("restart", 60*time.Second)
	req.Unit = "api@1.service"
	req.Lease.Token = fmt.Sprintf("tok'en $(touch %s)", marker)
	res, err := ch.Run(context.Background(), req)
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != first.Process.Pid {
				_ = syscall.Kill(pid, syscall.SIGKILL) // the restarted service
			}
		}
	})
	if err != nil {
		t.Fatalf("Run: %v\nargv: %q\noutput: %s", err, res.Argv, res.Output)
	}
	if !strings.Contains(res.Output, "restarted api@1.service: pid ") {
		t.Errorf("Output = %q", res.Output)
	}

	after := getPid(t, port)
	if after == before || !strings.HasPrefix(after, "pid=") {
		t.Errorf("after the restart the service answered %q (before: %q): want a new process", after, before)
	}
	waitDead(t, "the service's old process", first.Process.Pid, 5*time.Second)

	remote, err := os.ReadFile(filepath.Join(dir, "remote"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"unit=api@1.service",
		"note=" + note,
		"STADO_FENCE_DEADLINE=" + wantFenceEnv,
		"STADO_LEASE_EXPIRES_AT=" + wantExpiresEnv,
		"STADO_LEASE_TOKEN=" + req.Lease.Token,
	}, "\n") + "\n"
	if string(remote) != want {
		t.Errorf("the remote side received\n%s\nwant\n%s", remote, want)
	}
	noFile(t, marker)

	// What ran locally: strict host-key checking against our file only, and
	// the token never shown.
	argv := strings.Join(res.Argv, " ")
	for _, w := range []string{"-o BatchMode=yes", "-o StrictHostKeyChecking=yes", "-o UserKnownHostsFile=" + srv.KnownHosts,
		"-o IdentitiesOnly=yes", "-i " + srv.Identity, "-p " + strconv.Itoa(srv.Port), "-l " + srv.User, "-- 127.0.0.1 'timeout' '-s' 'KILL' ",
		"'STADO_LEASE_TOKEN=REDACTED'"} {
		if !strings.Contains(argv, w) {
			t.Errorf("argv %q lacks %q", argv, w)
		}
	}
	if strings.Contains(argv, "tok") {
		t.Errorf("the lease token shows in the reported argv: %q", argv)
	}
}

// TestSSHRefusesUnverifiedHostKey: with the server's key missing from, or
// different in, known_hosts, ssh refuses to connect and nothing runs.
func TestSSHRefusesUnverifiedHostKey(t *testing.T) {
	srv := sshtest.Start(t)
	otherPub := sshtest.Keygen(t, filepath.Join(t.TempDir(), "impostor"), "impostor")
	for name, knownHosts := range map[string]string{
		"unknown key": "",
		"changed key": fmt.Sprintf("[127.0.0.1]:%d %s\n", srv.Port, otherPub),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			kh := filepath.Join(dir, "known_hosts")
			if err := os.WriteFile(kh, []byte(knownHosts), 0o600); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(dir, "ran")
			cfg := srv.Config(map[string][]string{"restart": {"/usr/bin/touch", marker}})
			cfg.KnownHosts = kh
			ch, err := channel.NewSSH(cfg, channel.Options{Env: testEnv()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := ch.Run(context.Background(), sshRequest("restart", 30*time.Second))
			if !errors.Is(err, channel.ErrConnect) || res.ExitCode != 255 {
				t.Fatalf("Run = %+v, %v; want ErrConnect (ssh exit 255)", res, err)
			}
			if !strings.Contains(res.Output, "Host key verification failed") || !strings.Contains(err.Error(), kh) {
				t.Errorf("error %q / output %q: want ssh's host-key refusal and the known_hosts path", err, res.Output)
			}
			noFile(t, marker)
		})
	}
}

// TestSSHFenceKillsRemoteGroup: killing the local ssh client alone would
// leave the remote command running; the remote process group must die too.
func TestSSHFenceKillsRemoteGroup(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	ch, err := channel.NewSSH(srv.Config(map[string][]string{
		"restart": {"/bin/sh", testdata(t, "spawn.sh"), dir, "hang"},
	}), channel.Options{Env: testEnv()})
	if err != nil {
		t.Fatal(err)
	}
	// Generous, so that even a loaded machine connects well before it.
	const fence = 6 * time.Second
	req := sshRequest("restart", fence)
	done := runAsync(context.Background(), ch, req)
	leader := readPid(t, filepath.Join(dir, "leader.pid"), 10*time.Second)
	child := readPid(t, filepath.Join(dir, "child.pid"), 10*time.Second)
	// On a loaded machine the connection may take most of the fence; the
	// processes are only required alive while the deadline is still ahead.
	if time.Until(req.Deadline) > 500*time.Millisecond {
		select {
		case r := <-done:
			t.Fatalf("Run returned before the deadline: %+v, %v", r.res, r.err)
		default:
		}
		if !alive(leader) || !alive(child) {
			t.Fatalf("before the deadline: remote leader alive=%v, child alive=%v", alive(leader), alive(child))
		}
	} else {
		t.Logf("the remote processes started only %v before the deadline; not checking them alive", time.Until(req.Deadline))
	}
	var r runResult
	select {
	case r = <-done:
	case <-time.After(fence + 15*time.Second):
		t.Fatal("Run did not return within 15s of the fence deadline")
	}
	if !errors.Is(r.err, channel.ErrFenced) {
		t.Fatalf("Run = %+v, %v; want ErrFenced", r.res, r.err)
	}
	if late := r.at.Sub(req.Deadline); late > 10*time.Second {
		t.Errorf("Run returned %v after the deadline", late)
	}
	waitDead(t, "the remote repair's leader", leader, 5*time.Second)
	waitDead(t, "the remote repair's background child", child, 5*time.Second)
}

func TestSSHRefusesWhatItCannotRunSafely(t *testing.T) {
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A stand-in ssh binary that leaves a marker: proof that ssh was never
	// started for a refused request.
	marker := filepath.Join(dir, "ssh-ran")
	fakeSSH := filepath.Join(dir, "ssh")
	if err := os.WriteFile(fakeSSH, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := localconfig.SSHChannel{KnownHosts: kh, Binary: fakeSSH, Actions: map[string][]string{"restart": {"systemctl", "restart", "{unit}"}}}

	for _, tc := range []struct {
		name string
		cfg  func(*localconfig.SSHChannel)
		want string
	}{
		{"no known_hosts", func(c *localconfig.SSHChannel) { c.KnownHosts = "" }, "channels.ssh.known_hosts is not set"},
		{"missing known_hosts", func(c *localconfig.SSHChannel) { c.KnownHosts = filepath.Join(dir, "nope") }, "no such file"},
		{"relative known_hosts", func(c *localconfig.SSHChannel) { c.KnownHosts = "known_hosts" }, "must be an absolute path"},
		{"known_hosts ssh would split", func(c *localconfig.SSHChannel) { c.KnownHosts = dir + "/a b" }, "contains whitespace"},
		{"user like an option", func(c *localconfig.SSHChannel) { c.User = "-oProxyCommand=x" }, "channels.ssh.user"},
		{"program like an env assignment", func(c *localconfig.SSHChannel) {
			c.Actions = map[string][]string{"restart": {"A=b", "{unit}"}}
		}, "must not start with '-' or contain '='"},
		{"embedded placeholder", func(c *localconfig.SSHChannel) {
			c.Actions = map[string][]string{"restart": {"systemctl", "restart", "{unit}.d"}}
		}, "embeds {unit}"},
	} {
		cfg := good
		tc.cfg(&cfg)
		if _, err := channel.NewSSH(cfg, channel.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewSSH = %v; want %q", tc.name, err, tc.want)
		}
	}

	ch, err := channel.NewSSH(good, channel.Options{Env: testEnv()})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"-oProxyCommand=touch " + marker, "-oProxyCommand=x", "root@web-1", "a b", "$(reboot)", "../x"} {
		req := request("restart", 30*time.Second)
		req.Host = host
		if res, err := ch.Run(context.Background(), req); !errors.Is(err, channel.ErrRefused) || res.Started {
			t.Errorf("host %q: Run = %+v, %v; want ErrRefused", host, res, err)
		}
	}
	if _, err := ch.Run(context.Background(), request("restart", 500*time.Millisecond)); !errors.Is(err, channel.ErrFenced) {
		t.Errorf("with under a second of fence left: %v; want ErrFenced", err)
	}
	if _, err := ch.Run(context.Background(), request("check", 30*time.Second)); !errors.Is(err, channel.ErrUnknownAction) {
		t.Errorf("check: %v; want ErrUnknownAction", err)
	}
	noFile(t, marker)

	// The argv shape, on the stand-in: nothing but options before "--".
	res, err := ch.Run(context.Background(), request("restart", 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fakeSSH, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + kh,
		"-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "IdentitiesOnly=yes", "-p", "22", "-T", "--", "web-1"}
	if len(res.Argv) != len(want)+1 || !slices.Equal(res.Argv[:len(want)], want) {
		t.Fatalf("argv = %q\nwant %q + the remote command", res.Argv, want)
	}
	remote := res.Argv[len(want)]
	if !strings.HasPrefix(remote, "'timeout' '-s' 'KILL' '") ||
		!strings.HasSuffix(remote, "' 'env' 'STADO_LEASE_TOKEN=REDACTED' 'STADO_LEASE_EXPIRES_AT="+wantExpiresEnv+"' 'STADO_FENCE_DEADLINE="+wantFenceEnv+"' 'systemctl' 'restart' 'api.service'") {
		t.Errorf("remote command = %q", remote)
	}
}
