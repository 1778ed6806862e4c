package reliability

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reconcile/channel"
	"github.com/stado/stado/reconcile/registry"
)

// The roles the test binary plays for the exec channel. A fleet directory
// DIR holds what they need:
//
//	DIR/ctl.url          the simulated fleet's URL (see simFleet)
//	DIR/store.url        the store, reached directly (never through a fault proxy)
//	DIR/store.creds      its access key and secret, one a line (S3 only)
//	DIR/units/U.mode     how the repair of unit U behaves (see repairMain)
//	DIR/units/U.running  written by a repair in mode signal:D while it runs
//	DIR/repairs.log      one line per event, appended by every repair
//
// A repair reads its credentials from a file because the exec channel gives
// it no AWS_* variable: that the environment carries none is itself checked
// (an "env-leak" violation).

// logLine appends one line to DIR/repairs.log in a single write, so lines of
// concurrent repairs never interleave.
func logLine(dir string, fields ...string) { logTo(filepath.Join(dir, "repairs.log"), fields...) }

func logTo(path string, fields ...string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(strings.Join(fields, " ") + "\n")
}

func nowNS() string { return strconv.FormatInt(time.Now().UnixNano(), 10) }

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// openDirect opens the fleet's store as the repair sees it: directly, with
// the credentials in DIR/store.creds.
func openDirect(ctx context.Context, dir string) (objstore.Store, error) {
	o := objstore.OpenOptions{}
	if c := readTrim(filepath.Join(dir, "store.creds")); c != "" {
		key, secret, _ := strings.Cut(c, "\n")
		o.S3.Credentials = credentials.NewStaticCredentialsProvider(key, secret, "")
		o.S3.Timeout = 5 * time.Second
	}
	return objstore.Open(ctx, readTrim(filepath.Join(dir, "store.url")), o)
}

// checkLease logs a violation unless the lease on the service is held by
// this repair's token, and the store's clock is certainly before the
// instant the repair was told its lease expires.
func checkLease(ctx context.Context, dir, host, unit, token string, expires time.Time, when string) {
	violation := func(what string) { logLine(dir, "violation", nowNS(), host, unit, token, when+":"+what) }
	store, err := openDirect(ctx, dir)
	if err != nil {
		violation("cannot-open-store")
		return
	}
	obj, err := store.Get(ctx, lease.Key(registry.Subject(host, unit)))
	if err != nil {
		violation("no-lease-object")
		return
	}
	rec, err := lease.ParseRecord(obj.Body)
	switch {
	case err != nil:
		violation("unreadable-lease")
		return
	case rec.Token != token:
		violation("lease-held-by-another-token")
		return
	case !rec.ExpiresAt.Equal(expires):
		violation("lease-expiry-differs")
	}
	now, err := store.Now(ctx)
	if err != nil {
		violation("no-store-clock")
		return
	}
	// Certainly past the instant: the earliest the store's time can be is
	// at or after it.
	if !now.Earliest.Before(expires) {
		violation("lease-expired")
	}
}

// repairMain is the exec channel's restart action. It logs its start, checks
// its lease, behaves as DIR/units/UNIT.mode says, brings the unit up in the
// simulated fleet, checks its lease again and logs its end:
//
//	ok        start the unit at once
//	fail      exit 1 without starting it
//	slow:D    wait D, then start it
//	signal:D  write DIR/units/UNIT.running, wait D, then start it
//	hang      never finish (the fence must kill it)
func repairMain(dir, host, unit string) int {
	token := os.Getenv(channel.EnvLeaseToken)
	expiresRaw := os.Getenv(channel.EnvLeaseExpiresAt)
	expires, err := time.Parse(time.RFC3339Nano, expiresRaw)
	if token == "" || err != nil {
		logLine(dir, "violation", nowNS(), host, unit, "-", "no-lease-in-environment")
		return 2
	}
	logLine(dir, "start", nowNS(), host, unit, token, expiresRaw, strconv.Itoa(os.Getpid()))
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "STADO_STORE") {
			logLine(dir, "violation", nowNS(), host, unit, token, "env-leak:"+name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	checkLease(ctx, dir, host, unit, token, expires, "at-start")

	mode := readTrim(filepath.Join(dir, "units", unit+".mode"))
	switch {
	case mode == "fail":
		logLine(dir, "end", nowNS(), host, unit, token, "failed")
		fmt.Println("the unit refuses to start: exit status 1")
		return 1
	case mode == "hang":
		time.Sleep(time.Hour)
	case strings.HasPrefix(mode, "slow:"), strings.HasPrefix(mode, "signal:"):
		_, ds, _ := strings.Cut(mode, ":")
		d, _ := time.ParseDuration(ds)
		if strings.HasPrefix(mode, "signal:") {
			_ = os.WriteFile(filepath.Join(dir, "units", unit+".running"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		}
		time.Sleep(d)
	}
	resp, err := http.Post(readTrim(filepath.Join(dir, "ctl.url"))+"/ctl/start?unit="+url.QueryEscape(unit), "text/plain", nil)
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	resp.Body.Close()
	checkLease(ctx, dir, host, unit, token, expires, "at-end")
	logLine(dir, "end", nowNS(), host, unit, token, "ok")
	return 0
}

// checkMain is the exec channel's check action: 0 when the unit is up.
func checkMain(dir, _, unit string) int {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(readTrim(filepath.Join(dir, "ctl.url")) + "/svc/" + url.PathEscape(unit) + "/healthz")
	if err != nil {
		return 3
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}

// fakeSSHMain stands in for the OpenSSH client: it records its argv in
// DIR/ssh.log and fails as ssh does when it cannot connect.
func fakeSSHMain(dir string, args []string) int {
	logTo(filepath.Join(dir, "ssh.log"), append([]string{"ssh", nowNS()}, args...)...)
	fmt.Fprintln(os.Stderr, "ssh: connect to host: Connection refused (fake)")
	return 255
}
