package channel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/reconcile/channel"
)

// recordExec is an exec channel whose restart (and check) runs record.sh,
// recording into rec.
func recordExec(t *testing.T, rec string, opts channel.Options) channel.Channel {
	t.Helper()
	ch, err := channel.NewExec(localconfig.ExecChannel{Actions: map[string][]string{
		"restart": {testdata(t, "record.sh"), rec, "restart", "{host}", "--unit", "{unit}", "{service}", "{not a placeholder"},
		"check":   {testdata(t, "record.sh"), rec, "check", "{unit}"},
	}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestExecRunsSubstitutedArgvWithLeaseEnv(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record")
	// A stale token in the base environment must be replaced, not passed on.
	ch := recordExec(t, rec, channel.Options{Env: testEnv("STADO_LEASE_TOKEN=stale-token-from-parent")})
	if ch.Name() != "exec" || !ch.Has("restart") || !ch.Has("check") || ch.Has("start") {
		t.Fatalf("Name/Has: %q restart=%v check=%v start=%v", ch.Name(), ch.Has("restart"), ch.Has("check"), ch.Has("start"))
	}
	res, err := ch.Run(context.Background(), request("restart", 30*time.Second))
	if err != nil {
		t.Fatalf("Run: %v\noutput: %s", err, res.Output)
	}
	wantArgv := []string{testdata(t, "record.sh"), rec, "restart", "web-1", "--unit", "api.service", "api", "{not a placeholder"}
	if !slices.Equal(res.Argv, wantArgv) || !res.Started || res.ExitCode != 0 || res.Duration <= 0 {
		t.Errorf("Result = %+v, want Argv %q, started, exit 0, a duration", res, wantArgv)
	}
	got, err := os.ReadFile(rec)
	if err != nil {
		t.Fatalf("the program did not run: %v", err)
	}
	want := strings.Join([]string{
		"arg=" + rec, "arg=restart", "arg=web-1", "arg=--unit", "arg=api.service", "arg=api", "arg={not a placeholder",
		wantTokenEnvLine,
		"STADO_LEASE_EXPIRES_AT=" + wantExpiresEnv,
		"STADO_FENCE_DEADLINE=" + wantFenceEnv,
		"SECRET=unset",
	}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("the program received\n%s\nwant\n%s", got, want)
	}
	if want := "repaired " + rec + " restart web-1 --unit api.service api {not a placeholder\nlease REDACTED\n"; res.Output != want {
		t.Errorf("Output = %q, want %q", res.Output, want)
	}
}

func TestDefaultEnvKeepsNoStoreCredentials(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
	rec := filepath.Join(t.TempDir(), "record")
	ch := recordExec(t, rec, channel.Options{}) // nil Env: the allowlisted default
	if _, err := ch.Run(context.Background(), request("check", 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(rec)
	if !strings.Contains(string(got), "SECRET=unset\n") || !strings.Contains(string(got), wantTokenEnvLine+"\n") {
		t.Errorf("with the default environment the program saw:\n%s", got)
	}
	env := channel.DefaultEnv([]string{"PATH=/bin", "LC_ALL=C", "AWS_ACCESS_KEY_ID=x", "STADO_STORE=s3://b", "HOME=/root", "PATHX=1"})
	if !slices.Equal(env, []string{"PATH=/bin", "LC_ALL=C", "HOME=/root"}) {
		t.Errorf("DefaultEnv = %q", env)
	}
}

func TestExecNonZeroExitIsFailedWithCodeAndEscapedTail(t *testing.T) {
	ch, err := channel.NewExec(localconfig.ExecChannel{Actions: map[string][]string{
		"restart": {testdata(t, "fail.sh"), "7"},
	}}, channel.Options{Env: testEnv(), OutputLimit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ch.Run(context.Background(), request("restart", 30*time.Second))
	if !errors.Is(err, channel.ErrFailed) {
		t.Fatalf("err = %v, want ErrFailed", err)
	}
	if res.ExitCode != 7 || !res.Started {
		t.Errorf("ExitCode = %d, Started = %v; want 7, true", res.ExitCode, res.Started)
	}
	msg := err.Error()
	for _, want := range []string{"repair command failed: exec restart for api.service on web-1 exited with status 7", `last line: unit is broken`, `\x1b[2J`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.ContainsAny(msg, "\x1b\n") || strings.ContainsRune(res.Output, '\x1b') {
		t.Errorf("a raw escape or newline reached the error or the output: %q / %q", msg, res.Output)
	}
	if !strings.Contains(res.Output, `clear screen \x1b[2J then`) || !strings.HasSuffix(res.Output, "last line: unit is broken\n") {
		t.Errorf("Output tail = %q", res.Output)
	}
	// The tail is bounded: 1024 kept bytes (+ their escapes) and the note.
	if !strings.HasPrefix(res.Output, "[") || !strings.Contains(res.Output, "earlier bytes omitted]\n") || len(res.Output) > 1024+64 {
		t.Errorf("Output (%d bytes) is not a bounded tail: %q", len(res.Output), res.Output[:min(len(res.Output), 80)])
	}
}

func TestExecUnknownActionRunsNothing(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record")
	ch := recordExec(t, rec, channel.Options{Env: testEnv()})
	res, err := ch.Run(context.Background(), request("reboot", 30*time.Second))
	if !errors.Is(err, channel.ErrUnknownAction) || res.Started {
		t.Fatalf("Run(reboot) = %+v, %v; want ErrUnknownAction, not started", res, err)
	}
	if !strings.Contains(err.Error(), `the exec channel defines no action "reboot"`) || !strings.Contains(err.Error(), "defined: check, restart") {
		t.Errorf("error %q does not say what is defined", err)
	}
	noFile(t, rec)
}

func TestExecRefusesHostileNames(t *testing.T) {
	hostile := []string{
		"-oProxyCommand=touch /tmp/x", "a b", "$(reboot)", "../x", "-x", "", "`id`", "a;b", "a\nb",
		"{unit}", "x/y", "\x1b[2J", strings.Repeat("a", 254),
	}
	rec := filepath.Join(t.TempDir(), "record")
	ch := recordExec(t, rec, channel.Options{Env: testEnv()})
	for _, field := range []string{"host", "unit", "service"} {
		for _, v := range hostile {
			req := request("restart", 30*time.Second)
			switch field {
			case "host":
				req.Host = v
			case "unit":
				req.Unit = v
			case "service":
				req.Service = v
			}
			res, err := ch.Run(context.Background(), req)
			if !errors.Is(err, channel.ErrRefused) || res.Started {
				t.Errorf("%s %q: Run = %+v, %v; want ErrRefused, not started", field, v, res, err)
				continue
			}
			if strings.ContainsAny(err.Error(), "\x1b\n") {
				t.Errorf("%s %q: the error carries a raw control character: %q", field, v, err)
			}
		}
	}
	// The longest name allowed still runs.
	req := request("restart", 30*time.Second)
	req.Host = strings.Repeat("a", 253)
	if _, err := ch.Run(context.Background(), req); err != nil {
		t.Errorf("a 253-byte host was refused: %v", err)
	}
	if err := os.Remove(rec); err != nil {
		t.Errorf("the valid request did not run: %v", err)
	}
	noFile(t, rec)
}

func TestExecRefusesPlaceholderTemplates(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"/bin/echo", "--unit={unit}"}, `argument 1 "--unit={unit}" embeds {unit} inside a larger argument`},
		{[]string{"/bin/echo", "{host}.example.org"}, "embeds {host}"},
		{[]string{"/bin/echo", "x{service}"}, "embeds {service}"},
		{[]string{"/bin/echo", "{hostname}"}, `"{hostname}" is not a placeholder stado knows`},
		{[]string{"{host}", "restart"}, "the program (first element) is the placeholder {host}"},
		{[]string{}, "the command is empty"},
	} {
		_, err := channel.NewExec(localconfig.ExecChannel{Actions: map[string][]string{"restart": tc.argv}}, channel.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "channels.exec.actions.restart") {
			t.Errorf("NewExec(%q) = %v, want an error naming channels.exec.actions.restart and %q", tc.argv, err, tc.want)
		}
	}
}

func TestRunRefusesWithoutLeaseOrFence(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record")
	ch := recordExec(t, rec, channel.Options{Env: testEnv()})
	for name, mutate := range map[string]func(*channel.Request){
		"no token":             func(r *channel.Request) { r.Lease.Token = "" },
		"token with a newline": func(r *channel.Request) { r.Lease.Token = "a\nb" },
		"no expiry":            func(r *channel.Request) { r.Lease.ExpiresAt = time.Time{} },
		"no fence instant":     func(r *channel.Request) { r.Lease.FenceInstant = time.Time{} },
		"no deadline":          func(r *channel.Request) { r.Deadline = time.Time{} },
	} {
		req := request("restart", 30*time.Second)
		mutate(&req)
		if res, err := ch.Run(context.Background(), req); !errors.Is(err, channel.ErrRefused) || res.Started {
			t.Errorf("%s: Run = %+v, %v; want ErrRefused", name, res, err)
		}
	}
	noFile(t, rec)
}

func TestDeadlinePassedRunsNothing(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record")
	ch := recordExec(t, rec, channel.Options{Env: testEnv()})
	res, err := ch.Run(context.Background(), request("restart", -time.Second))
	if !errors.Is(err, channel.ErrFenced) || res.Started {
		t.Fatalf("Run = %+v, %v; want ErrFenced, not started", res, err)
	}
	noFile(t, rec)
}

func TestDeadlineIsJudgedOnTheInjectedClock(t *testing.T) {
	// The fence deadline comes from the lease manager's clock; the channel
	// must read the same clock, not time.Now.
	rec := filepath.Join(t.TempDir(), "record")
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(t0)
	ch := recordExec(t, rec, channel.Options{Env: testEnv(), Clock: fake})
	req := request("restart", 0)
	req.Deadline = t0.Add(-time.Millisecond) // far in the real future, just past on the fake clock
	if res, err := ch.Run(context.Background(), req); !errors.Is(err, channel.ErrFenced) || res.Started {
		t.Fatalf("deadline passed on the injected clock: Run = %+v, %v; want ErrFenced", res, err)
	}
	noFile(t, rec)
	req.Deadline = t0.Add(time.Minute) // in the real past, a minute away on the fake clock
	if _, err := ch.Run(context.Background(), req); err != nil {
		t.Fatalf("deadline a minute away on the injected clock: %v", err)
	}
}

func TestStartErrorRunsNothing(t *testing.T) {
	ch, err := channel.NewExec(localconfig.ExecChannel{Actions: map[string][]string{
		"restart": {"/nonexistent/fleet-repair", "{unit}"},
	}}, channel.Options{Env: testEnv()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ch.Run(context.Background(), request("restart", 30*time.Second))
	if !errors.Is(err, channel.ErrStart) || res.Started || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Run = %+v, %v; want ErrStart wrapping ErrNotExist", res, err)
	}
	if !strings.Contains(err.Error(), "check that the program exists") {
		t.Errorf("error %q does not say what to do", err)
	}
}

func spawnExec(t *testing.T, dir, mode string, opts channel.Options) channel.Channel {
	t.Helper()
	ch, err := channel.NewExec(localconfig.ExecChannel{Actions: map[string][]string{
		"restart": {testdata(t, "spawn.sh"), dir, mode},
	}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestFenceKillsWholeProcessGroup: a repair that would outlive its lease,
// and the child it started, are both SIGKILLed at the fence deadline.
func TestFenceKillsWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	ch := spawnExec(t, dir, "hang", channel.Options{Env: testEnv()})
	const fence = 1500 * time.Millisecond
	req := request("restart", fence)
	done := runAsync(context.Background(), ch, req)

	leader := readPid(t, filepath.Join(dir, "leader.pid"), 10*time.Second)
	child := readPid(t, filepath.Join(dir, "child.pid"), 10*time.Second)
	select {
	case r := <-done:
		t.Fatalf("Run returned before the deadline: %+v, %v", r.res, r.err)
	default:
	}
	// Both were running before the deadline, so their death below is the
	// fence's doing.
	if !alive(leader) || !alive(child) {
		t.Fatalf("before the deadline: leader alive=%v, child alive=%v", alive(leader), alive(child))
	}

	var r runResult
	select {
	case r = <-done:
	case <-time.After(fence + 15*time.Second):
		t.Fatal("Run did not return within 15s of the fence deadline")
	}
	if !errors.Is(r.err, channel.ErrFenced) || !r.res.Started || r.res.ExitCode != -1 {
		t.Fatalf("Run = %+v, %v; want ErrFenced, started, exit -1", r.res, r.err)
	}
	if r.at.Before(req.Deadline) {
		t.Errorf("Run returned %v before the deadline", req.Deadline.Sub(r.at))
	}
	if late := r.at.Sub(req.Deadline); late > 10*time.Second {
		t.Errorf("Run returned %v after the deadline", late)
	}
	if !strings.Contains(r.err.Error(), "was still running at the fence deadline") || !strings.Contains(r.res.Output, "spawned ") {
		t.Errorf("error %q / output %q", r.err, r.res.Output)
	}
	waitDead(t, "the repair's leader", leader, 5*time.Second)
	waitDead(t, "the repair's background child", child, 5*time.Second)
}

// TestLeftoverChildIsKilledAndDoesNotBlockRun: the leader exits at once but
// its background child holds the output pipe; Run must neither wait for the
// child nor let it live on.
func TestLeftoverChildIsKilledAndDoesNotBlockRun(t *testing.T) {
	dir := t.TempDir()
	ch := spawnExec(t, dir, "exit", channel.Options{Env: testEnv()})
	start := time.Now()
	res, err := ch.Run(context.Background(), request("restart", time.Minute))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v; want success", res, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v: it waited for the child holding its output", took)
	}
	child := readPid(t, filepath.Join(dir, "child.pid"), time.Second)
	waitDead(t, "the leader's leftover child", child, 5*time.Second)
}

// TestEscapedChildDoesNotHangRun: a child that left the process group
// (setsid) cannot be killed with it, but holding the output pipe must not
// make Run hang; the output says what happened.
func TestEscapedChildDoesNotHangRun(t *testing.T) {
	dir := t.TempDir()
	ch := spawnExec(t, dir, "escape", channel.Options{Env: testEnv(), WaitDelay: 300 * time.Millisecond})
	start := time.Now()
	res, err := ch.Run(context.Background(), request("restart", time.Minute))
	child := readPid(t, filepath.Join(dir, "child.pid"), time.Second)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) }) // the test's own stray
	if err != nil {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	if !strings.Contains(res.Output, "a process that left the repair's process group still held its output") {
		t.Errorf("Output %q does not report the escaped process", res.Output)
	}
}

func TestCallerCancelKillsGroupAndIsNotFenced(t *testing.T) {
	dir := t.TempDir()
	ch := spawnExec(t, dir, "hang", channel.Options{Env: testEnv()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, ch, request("restart", time.Minute))
	leader := readPid(t, filepath.Join(dir, "leader.pid"), 10*time.Second)
	child := readPid(t, filepath.Join(dir, "child.pid"), 10*time.Second)
	cancel()
	var r runResult
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, channel.ErrFenced) || errors.Is(r.err, channel.ErrFailed) {
		t.Fatalf("err = %v; want context.Canceled only", r.err)
	}
	waitDead(t, "leader", leader, 5*time.Second)
	waitDead(t, "child", child, 5*time.Second)
}

func TestLocalRunsSystemctl(t *testing.T) {
	log := filepath.Join(t.TempDir(), "systemctl.log")
	stub := testdata(t, "systemctl-stub")
	ch, err := channel.NewLocal(localconfig.LocalChannel{Systemctl: stub}, channel.Options{Env: testEnv("STUB_LOG=" + log), Hostname: "web-1.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Name() != "local" || !ch.Has("restart") || !ch.Has("check") || !ch.Has("start") || ch.Has("stop") || ch.Has("mask") {
		t.Fatalf("Name/Has wrong for %q", ch.Name())
	}
	ctx := context.Background()
	res, err := ch.Run(ctx, request("restart", 30*time.Second)) // host web-1: this machine's short name
	if err != nil || !slices.Equal(res.Argv, []string{stub, "restart", "api.service"}) {
		t.Fatalf("restart: %+v, %v", res, err)
	}
	res, err = ch.Run(ctx, request("check", 30*time.Second))
	if !errors.Is(err, channel.ErrFailed) || res.ExitCode != 3 {
		t.Fatalf("check of an inactive unit: %+v, %v; want ErrFailed with exit 3", res, err)
	}
	if _, err := ch.Run(ctx, request("stop", 30*time.Second)); !errors.Is(err, channel.ErrUnknownAction) {
		t.Fatalf("stop: %v; want ErrUnknownAction", err)
	}
	other := request("restart", 30*time.Second)
	other.Host = "web-2"
	if _, err := ch.Run(ctx, other); !errors.Is(err, channel.ErrRefused) || !strings.Contains(err.Error(), "declare the service with channel ssh or exec") {
		t.Fatalf("a service on another host: %v; want ErrRefused", err)
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "restart api.service\nis-active --quiet api.service\n"; string(got) != want {
		t.Errorf("systemctl was called with\n%s\nwant\n%s", got, want)
	}

	active, err := channel.NewLocal(localconfig.LocalChannel{Systemctl: stub}, channel.Options{Env: testEnv("STUB_LOG="+log, "STUB_ACTIVE=yes"), Hostname: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := active.Run(ctx, request("check", 30*time.Second)); err != nil {
		t.Errorf("check of an active unit: %v", err)
	}
}

func TestNew(t *testing.T) {
	cfg := localconfig.Default()
	cfg.Channels.Exec.Actions = map[string][]string{"restart": {"/bin/true"}}
	for _, kind := range []string{"exec", "local"} {
		ch, err := channel.New(kind, cfg, channel.Options{})
		if err != nil || ch.Name() != kind {
			t.Errorf("New(%q) = %v, %v", kind, ch, err)
		}
	}
	if _, err := channel.New("ssh", cfg, channel.Options{}); err == nil || !strings.Contains(err.Error(), "channels.ssh.known_hosts is not set") {
		t.Errorf("New(ssh) without known_hosts = %v; want a refusal", err)
	}
	if _, err := channel.New("telnet", nil, channel.Options{}); err == nil || !strings.Contains(err.Error(), "must be exec, ssh or local") {
		t.Errorf("New(telnet) = %v", err)
	}
}
