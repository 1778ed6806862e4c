package channel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/stado/stado/internal/termsafe"
)

// errFence is the cause of the run context when the fence deadline, rather
// than the caller, ended it.
var errFence = errors.New("fence deadline reached")

// runFenced runs argv (shown is what to report: argv with secrets redacted)
// in a process group of its own, with req's lease in its environment, and
// SIGKILLs the whole group at req.Deadline. Whatever way the leader ends, the
// group is killed after it, so no child outlives the run.
func runFenced(ctx context.Context, o Options, kind string, req Request, argv, shown []string) (res Result, err error) {
	res = Result{Argv: shown, ExitCode: -1}
	what := fmt.Sprintf("%s %s for %s on %s", kind, req.Action, req.Unit, req.Host)
	defer func() {
		o.Logger.LogAttrs(ctx, slog.LevelDebug, "channel run",
			slog.String("channel", kind), slog.String("action", req.Action),
			slog.String("host", req.Host), slog.String("unit", req.Unit),
			slog.Bool("started", res.Started), slog.Int("exit_code", res.ExitCode),
			slog.Duration("duration", res.Duration), slog.Any("error", err))
	}()

	remaining := req.Deadline.Sub(o.Clock.Now())
	if remaining <= 0 {
		return res, fmt.Errorf("%w: %s was not started: the deadline passed %v ago; nothing ran; take a fresh lease before repairing", ErrFenced, what, (-remaining).Round(time.Millisecond))
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s was not started: the reconciler is stopping: %w", what, context.Cause(ctx))
	}
	// The fence is a real timer set from the injected clock's reading: the
	// deadline is judged on the clock the lease minted it with, and the
	// kill happens in real time.
	fctx, cancel := context.WithTimeoutCause(ctx, remaining, errFence)
	defer cancel()

	// Our own pipe rather than exec's copying goroutine: after the group is
	// killed we know whether anyone still holds the write end (a process
	// that left the group), and can stop waiting for it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("%w: %s: create the output pipe: %w; the machine may be out of file descriptors", ErrStart, what, err)
	}
	defer pr.Close()

	cmd := exec.CommandContext(fctx, argv[0], argv[1:]...)
	cmd.Env = childEnv(o.Env, req)
	cmd.Stdout, cmd.Stderr = pw, pw
	// Setpgid makes the leader's pid the group id, so kill(-pid) reaches
	// every descendant that did not deliberately leave the group.
	// Pdeathsig: the fence is enforced by this process; if it dies (kill
	// -9, OOM) nothing would stop the repair at its deadline, and after the
	// lease's instant another reconciler repairs the same service while
	// the orphan still runs. The kernel kills the leader instead. It sends
	// the signal when the thread that forked the leader exits, so this
	// goroutine keeps its thread until the leader has exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }

	start := o.Clock.Now()
	startErr := cmd.Start()
	pw.Close()
	if startErr != nil {
		res.Duration = o.Clock.Now().Sub(start)
		if context.Cause(fctx) == errFence {
			return res, fmt.Errorf("%w: %s was not started: the deadline came as it started; nothing ran; take a fresh lease before repairing", ErrFenced, what)
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("%s was not started: the reconciler is stopping: %w", what, context.Cause(ctx))
		}
		return res, fmt.Errorf("%w: %s: %w; check that the program exists and this user may execute it", ErrStart, what, startErr)
	}
	res.Started = true
	pid := cmd.Process.Pid

	out := newTail(o.OutputLimit)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()

	waitExited(pid)
	// Judged when the leader ended: a deadline that fires while we reap
	// must not turn a finished repair into a fenced one.
	fenced := context.Cause(fctx) == errFence
	stopped := !fenced && ctx.Err() != nil
	// Kill what is left of the group while the leader is still an unreaped
	// zombie: its pid, and so the group id, cannot be reused by an
	// unrelated process before this kill lands.
	_ = killGroup(pid)
	_ = cmd.Wait()
	res.Duration = o.Clock.Now().Sub(start)

	// A real timer, not the injected clock: this bounds a wait on the
	// kernel, which a fake clock would never end.
	escaped := false
	t := time.NewTimer(o.WaitDelay)
	select {
	case <-copied:
	case <-t.C:
		// Someone outside the group still holds the pipe: stop reading so
		// Run returns, and say so.
		escaped = true
		pr.Close()
		<-copied
	}
	t.Stop()
	// A repair script that echoes its environment, or a remote shell that
	// quotes back the command line it failed to parse, must not put the
	// lease token into a report.
	res.Output = out.String(req.Lease.Token, strings.ReplaceAll(req.Lease.Token, "'", `'\''`))
	if escaped {
		o.Logger.LogAttrs(ctx, slog.LevelWarn, "a repair's descendant left its process group and still holds its output; it was not killed",
			slog.String("channel", kind), slog.String("action", req.Action), slog.String("host", req.Host), slog.String("unit", req.Unit))
		res.Output += fmt.Sprintf("\n[stado: a process that left the repair's process group still held its output %v after the group was killed; it was not killed]", o.WaitDelay)
	}

	var ws syscall.WaitStatus
	if ps := cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		ws, _ = ps.Sys().(syscall.WaitStatus)
	}
	switch {
	case fenced:
		return res, fmt.Errorf("%w: %s was still running at the fence deadline, %v after it started, and its whole process group was killed (output: %s); make the repair finish well within decision_ttl_seconds minus fence_allowance_seconds", ErrFenced, what, res.Duration.Round(time.Millisecond), errorTail(res.Output))
	case stopped:
		return res, fmt.Errorf("%s was stopped because the reconciler is stopping; its process group was killed: %w", what, context.Cause(ctx))
	case cmd.ProcessState == nil:
		return res, fmt.Errorf("%w: %s: its exit status could not be read; treat the repair as not done", ErrFailed, what)
	case ws.Signaled():
		return res, fmt.Errorf("%w: %s was killed by signal %v (output: %s); find out what killed it", ErrFailed, what, ws.Signal(), errorTail(res.Output))
	case res.ExitCode != 0:
		return res, fmt.Errorf("%w: %s exited with status %d (output: %s); read the output, fix the command or the service", ErrFailed, what, res.ExitCode, errorTail(res.Output))
	}
	return res, nil
}

// waitExited blocks until the process pid has exited, without reaping it
// (WNOWAIT), so that its group id stays reserved until cmd.Wait reaps it.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			return
		}
	}
}

// killGroup SIGKILLs the process group pgid. os.ErrProcessDone, when the
// group is already gone, tells exec.Cmd this is not a failure to cancel.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// tail keeps the last limit bytes written to it and counts the rest. One
// goroutine writes; String is called after it is done.
type tail struct {
	limit int
	buf   []byte
	total int64
}

func newTail(limit int) *tail { return &tail{limit: limit, buf: make([]byte, 0, 2*limit)} }

func (t *tail) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		// Shift in place: the buffer never grows past twice the limit.
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is the kept tail, starting at a character boundary, with every
// occurrence of a secret replaced by REDACTED, control characters escaped,
// and a note of what was cut.
func (t *tail) String(secrets ...string) string {
	b := t.buf
	note := ""
	if omitted := t.total - int64(len(b)); omitted > 0 {
		cut := 0
		for cut < len(b) && cut < utf8.UTFMax-1 && !utf8.RuneStart(b[cut]) {
			cut++
		}
		b = b[cut:]
		note = fmt.Sprintf("[%d earlier bytes omitted]\n", omitted+int64(cut))
	}
	s := string(b)
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "REDACTED")
		}
	}
	return note + termsafe.Lines(s)
}

// errorTailLimit bounds the output quoted in an error message, which is one
// line in a report's detail.
const errorTailLimit = 512

// errorTail is the end of an (already escaped) output for an error message:
// one line, bounded, quoted.
func errorTail(output string) string {
	s := strings.TrimSpace(output)
	if s == "" {
		return "none"
	}
	if len(s) > errorTailLimit {
		s = s[len(s)-errorTailLimit:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
		s = "..." + s
	}
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
	return "\"" + s + "\""
}
