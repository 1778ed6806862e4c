package channel_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/localconfig"
	"github.com/stado/stado/reconcile/channel"
)

// orphanEnv makes TestHelperReconcilerRunsRepair act as a reconciler that
// runs one long repair, writing the repair's pid to the file it names.
const orphanEnv = "STADO_CHANNEL_TEST_ORPHAN_PIDFILE"

// TestHelperReconcilerRunsRepair is not a test on its own: it is the
// reconciler process TestRepairDiesWithKilledReconciler starts and kills.
func TestHelperReconcilerRunsRepair(t *testing.T) {
	pidFile := os.Getenv(orphanEnv)
	if pidFile == "" {
		t.Skip("helper process for TestRepairDiesWithKilledReconciler")
	}
	ch, err := channel.NewExec(localconfig.ExecChannel{Actions: map[string][]string{
		"restart": {"/bin/sh", "-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, pidFile},
	}}, channel.Options{Env: testEnv()})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = ch.Run(context.Background(), request("restart", time.Minute))
}

// TestRepairDiesWithKilledReconciler is the regression test of a bug the
// reliability suite found (SIGKILL of `stado optimize run` mid-repair): the
// fence is a timer in the reconciler, so a reconciler killed mid-repair left
// its repair running with nothing to stop it at the fence deadline; after
// the lease's instant the next reconciler repaired the same service while
// the orphan still ran. The repair must die with its reconciler.
func TestRepairDiesWithKilledReconciler(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "repair.pid")
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperReconcilerRunsRepair$")
	helper.Env = append(os.Environ(), orphanEnv+"="+pidFile)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = helper.Wait(); close(done) }()
	repair := readPid(t, pidFile, 20*time.Second)
	if !alive(repair) {
		t.Fatal("the repair is not running")
	}
	_ = helper.Process.Signal(syscall.SIGKILL)
	<-done
	waitDead(t, "the repair of a reconciler killed mid-repair", repair, 5*time.Second)
	_ = syscall.Kill(repair, syscall.SIGKILL) // do not leave it behind if it survived
}
