package beacon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func stub(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata/systemctl-stub")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQuerySystemd(t *testing.T) {
	log := filepath.Join(t.TempDir(), "args")
	t.Setenv("STUB_LOG", log)
	rep, err := QuerySystemd(context.Background(), stub(t),
		[]string{"api.service", "sshd.service", "ghost.service", "worker@1.service", "clean.service", "web", "api.service", "stopped.service"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Unit{
		{Unit: "api.service", ActiveState: Failed, SubState: "failed"},
		// Asked as sshd.service, answered by its real name ssh.service:
		// reported under the name asked, which is the name declared.
		{Unit: "sshd.service", ActiveState: Active, SubState: "running"},
		{Unit: "worker@1.service", ActiveState: Activating, SubState: "auto-restart"},
		{Unit: "clean.service", ActiveState: "maintenance", SubState: "cleaning"},
		{Unit: "web", ActiveState: Active, SubState: "running"},
		{Unit: "stopped.service", ActiveState: Inactive, SubState: "dead"},
	}
	if !reflect.DeepEqual(rep.Units, want) {
		t.Errorf("units\n got %+v\nwant %+v", rep.Units, want)
	}
	if !reflect.DeepEqual(rep.NotFound, []string{"ghost.service"}) {
		t.Errorf("not found: %v", rep.NotFound)
	}
	args, _ := os.ReadFile(log)
	wantArgs := "show --no-pager -p Id -p Names -p LoadState -p ActiveState -p SubState -- api.service sshd.service ghost.service worker@1.service clean.service web stopped.service\n"
	if string(args) != wantArgs {
		t.Errorf("systemctl called with\n%s\nwant\n%s", args, wantArgs)
	}
}

func TestQuerySystemdBatches(t *testing.T) {
	log := filepath.Join(t.TempDir(), "args")
	t.Setenv("STUB_LOG", log)
	units := make([]string, showBatch+3)
	for i := range units {
		units[i] = fmt.Sprintf("u%d.service", i)
	}
	rep, err := QuerySystemd(context.Background(), stub(t), units)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(log)
	if calls := strings.Count(string(args), "\n"); calls != 2 || len(rep.NotFound) != len(units) {
		t.Errorf("%d calls, %d not found", calls, len(rep.NotFound))
	}
}

// TestQuerySystemdRefusesToGuess: any answer that cannot be matched to the
// unit asked fails the whole query.
func TestQuerySystemdRefusesToGuess(t *testing.T) {
	ctx := context.Background()
	_, err := QuerySystemd(ctx, stub(t), []string{"api.service", "liar.service"})
	if err == nil || !strings.Contains(err.Error(), `the answer for "liar.service" is about "other.service"; refusing to report one unit's state as another's`) {
		t.Errorf("mismatched answer: %v", err)
	}
	t.Setenv("STUB_MODE", "short")
	_, err = QuerySystemd(ctx, stub(t), []string{"api.service", "web.service"})
	if err == nil || !strings.Contains(err.Error(), "show answered 1 times for 2 units; refusing to guess") {
		t.Errorf("missing answer: %v", err)
	}
	t.Setenv("STUB_MODE", "fail")
	_, err = QuerySystemd(ctx, stub(t), []string{"api.service"})
	if err == nil || !strings.Contains(err.Error(), `show: exit status 1: "System has not been booted with systemd`) {
		t.Errorf("failing systemctl: %v", err)
	}
	_, err = QuerySystemd(ctx, filepath.Join(t.TempDir(), "no-such-systemctl"), []string{"api.service"})
	if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("missing systemctl: %v", err)
	}
	if _, err := QuerySystemd(ctx, stub(t), []string{"-x"}); err == nil {
		t.Error("a unit that reads as an option must be refused before systemctl runs")
	}
}

func TestParseShow(t *testing.T) {
	got, err := ParseShow([]byte("\nId=a.service\nNames=a.service b.service\nActiveState=active\nDescription=x=y\n\n\nId=c.service\nActiveState=failed\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"Id": "a.service", "Names": "a.service b.service", "ActiveState": "active", "Description": "x=y"},
		{"Id": "c.service", "ActiveState": "failed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	if got, err := ParseShow(nil); err != nil || len(got) != 0 {
		t.Errorf("empty output: %v, %v", got, err)
	}
	for out, want := range map[string]string{
		"Id=a\nActiveState=active\nId=b\n": `line 3: Id appears twice for one unit (a blank line missing between units?)`,
		"Id=a\nwhat is this\n":             `line 2: "what is this" is not KEY=VALUE`,
		"=a\n":                             `line 1: "=a" is not KEY=VALUE`,
		"Id\x1b=a\n":                       `line 1: "Id\x1b=a" is not KEY=VALUE`,
	} {
		if _, err := ParseShow([]byte(out)); err == nil || err.Error() != want {
			t.Errorf("ParseShow(%q) = %v, want %q", out, err, want)
		}
	}
}
