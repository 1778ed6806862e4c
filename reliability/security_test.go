package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/faultproxy"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/reports"
)

// TestWritesOutsideAllowlistSendNothing: every kind of write to a key
// outside the allowlist (or not a key at all) is refused before a single
// request reaches the S3 server, and creates nothing on an fs store.
func TestWritesOutsideAllowlistSendNothing(t *testing.T) {
	ctx := context.Background()
	p, err := faultproxy.Start(s3srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bucket := s3srv.Bucket(t)
	url := strings.Replace(s3srv.URL(bucket, "fleet"), "endpoint="+s3srv.Endpoint, "endpoint="+p.URL, 1)
	s3store, err := objstore.Open(ctx, url, objstore.OpenOptions{S3: objstore.S3Options{Credentials: s3srv.Credentials()}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fsstore, err := objstore.Open(ctx, filepath.Join(dir, "store"), objstore.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"other/x", "state", "statex/y", "stat/x", "State/x", "/state/x", "./state/x", "../state/x", "x/state/y",
		"state/../x", "state/./x", "state//x", "state/\x1b[2J", "", "state/" + strings.Repeat("a", 2000)}
	writes := map[string]func(s objstore.Store, key string) error{
		"create":          func(s objstore.Store, k string) error { _, err := s.Create(ctx, k, []byte("x")); return err },
		"put":             func(s objstore.Store, k string) error { _, err := s.Put(ctx, k, []byte("x")); return err },
		"put-if-match":    func(s objstore.Store, k string) error { _, err := s.PutIfMatch(ctx, k, []byte("x"), "e"); return err },
		"delete":          func(s objstore.Store, k string) error { return s.Delete(ctx, k) },
		"delete-if-match": func(s objstore.Store, k string) error { return s.DeleteIfMatch(ctx, k, "e") },
	}
	for _, key := range keys {
		for op, w := range writes {
			for name, s := range map[string]objstore.Store{"s3": s3store, "fs": fsstore} {
				err := w(s, key)
				figures.add("security: writes outside the allowlist refused", 1)
				if !errors.Is(err, objstore.ErrOutsideAllowlist) && !errors.Is(err, objstore.ErrInvalidKey) {
					t.Errorf("%s %s %q: %v, want a refusal", name, op, key, err)
				}
			}
		}
	}
	if n := p.Forwarded(); n != 0 {
		t.Errorf("%d requests reached the S3 server for refused writes", n)
	}
	var found []string
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasSuffix(path, ".stado.lock") {
			found = append(found, path)
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("refused writes left files: %v", found)
	}
}

// TestCredentialsNeverShown runs stado against S3 with the server's
// credentials in its environment, at debug level in text and JSON logs,
// through successful commands, --json outputs, a tick that repairs, and
// failing ones (a wrong secret, an unreachable endpoint, credentials put in
// the store URL): neither the secret nor the access key id appears on
// stdout or stderr, in any stored object, or in a repair command's
// environment.
func TestCredentialsNeverShown(t *testing.T) {
	f := newFleet(t, "s3")
	f.declare(3, 1)
	f.applyPolicy(reliabilityPolicy)
	f.setModes(f.svcs, "ok")
	f.down(f.svcs[0])
	secrets := map[string]string{"secret access key": s3srv.SecretKey, "access key id": s3srv.AccessKey}
	leak := func(where, text string) {
		for what, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("the %s appears in %s", what, where)
				figures.add("credential leaks", 1)
			}
		}
	}
	var outputs int
	run := func(env []string, store string, args ...string) result {
		cmd := f.cmd(args...)
		if store != "" {
			cmd.Args[2] = store
		}
		cmd.Env = append(cmd.Env, env...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{Stdout: out.String(), Stderr: errb.String()}
		if err != nil {
			r.Code = 1
		}
		outputs++
		leak("stado "+strings.Join(args, " ")+" stdout", r.Stdout)
		leak("stado "+strings.Join(args, " ")+" stderr", r.Stderr)
		if strings.Contains(r.Stderr, "panic") {
			t.Errorf("stado %v panicked:\n%s", args, r.Stderr)
		}
		return r
	}
	for _, logs := range [][]string{{"-vv"}, {"-vv", "--log-format", "json"}} {
		for _, args := range [][]string{
			{"optimize", "run", "--json"},
			{"optimize", "run"},
			{"optimize", "status", "--all"},
			{"optimize", "status", "--json", "--all"},
			{"optimize", "history", "--json"},
			{"optimize", "policy", "show", "--json"},
			{"service", "list", "--json"},
			{"service", "show"},
			{"beacon", "publish", "--host", "h00", "--state", "s0000.service=active", "--state", "s0001.service=active", "--state", "s0002.service=active"},
			{"optimize", "pause", "credential drill"},
			{"optimize", "resume"},
			{"optimize", "breaker", "reset"},
		} {
			if r := run(nil, "", append(append([]string{}, logs...), args...)...); r.Code != 0 {
				t.Errorf("stado %v: %s", args, r.Stderr)
			}
		}
		// Failing: a wrong secret, an endpoint that does not answer,
		// credentials written into the store URL.
		wrong := []string{"AWS_SECRET_ACCESS_KEY=" + strings.Repeat("0", len(s3srv.SecretKey))}
		for _, args := range [][]string{{"optimize", "run", "--json"}, {"optimize", "status", "--json"}, {"optimize", "pause", "x"}} {
			r := run(wrong, "", append(append([]string{}, logs...), args...)...)
			if r.Code == 0 || !strings.Contains(strings.ToLower(r.Stderr), "denied") {
				t.Errorf("stado %v with a wrong secret: exit %d, want access denied:\n%s", args, r.Code, lastLines(r.Stderr, 3))
			}
		}
		dead := strings.Replace(f.storeURL, f.proxy.URL, "http://127.0.0.1:1", 1)
		if r := run(nil, dead, append(append([]string{}, logs...), "optimize", "run")...); r.Code == 0 {
			t.Errorf("a tick against an unreachable store succeeded")
		}
		withCreds := strings.Replace(f.storeURL, "s3://", "s3://"+s3srv.AccessKey+":"+s3srv.SecretKey+"@", 1)
		run(nil, withCreds, append(append([]string{}, logs...), "optimize", "status")...)
		withCreds = strings.Replace(f.storeURL, "endpoint=http://", "endpoint=http://"+s3srv.AccessKey+":"+s3srv.SecretKey+"@", 1)
		run(nil, withCreds, append(append([]string{}, logs...), "optimize", "status")...)
	}
	// Every stored object.
	ctx := context.Background()
	var keys []string
	if err := f.store.List(ctx, "", func(e objstore.Entry) error { keys = append(keys, e.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		o, err := f.store.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		leak("the stored object "+k, string(o.Body))
	}
	// The repair ran, and saw no AWS_ variable (its env-leak check).
	runs := f.checkRepairLog("credentials")
	if len(runs) == 0 {
		t.Error("no repair ran: the repair's environment was not checked")
	}
	b, _ := os.ReadFile(filepath.Join(f.dir, "repairs.log"))
	leak("the repair log", string(b))
	figures.add("security: outputs and objects checked for credentials", outputs+len(keys))
	if st := f.checkStore("credentials", leaseTTL); st.Latest == nil {
		t.Error("no report was stored")
	}
}

// TestSSHNeverWithoutStrictHostKeys: the ssh channel never runs ssh without
// strict host-key checking (no known_hosts: refused, at config load when ssh
// actions are configured, at the repair otherwise), passes the options that
// enforce it, and never lets a host or unit from stored data reach ssh as an
// option or a login (a leading '-', an '@').
func TestSSHNeverWithoutStrictHostKeys(t *testing.T) {
	f := newFleet(t, "fs")
	f.applyPolicy(reliabilityPolicy)
	bin := filepath.Join(f.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(bin, "ssh")
	if err := os.WriteFile(fake, []byte(fmt.Sprintf("#!/bin/sh\nexec %q rel-fake-ssh %q \"$@\"\n", f.exe, f.dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	knownHosts := f.write("known_hosts", "h00 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	sshLog := filepath.Join(f.dir, "ssh.log")
	pathEnv := "PATH=" + bin + ":" + os.Getenv("PATH")
	registry := func(host, unit string) string {
		return fmt.Sprintf("services:\n  - name: api\n    host: %s\n    unit: %s\n    endpoint: %s\n    repair: restart\n    channel: ssh\n", host, unit, f.sim.endpoint(unit))
	}
	tick := func(what string) (result, *reports.Report) {
		t.Helper()
		cmd := f.cmd("optimize", "run", "--json")
		cmd.Env = append(cmd.Env, pathEnv)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{Stdout: out.String(), Stderr: errb.String()}
		if err != nil {
			r.Code = cmd.ProcessState.ExitCode()
		}
		if msg := cleanStderr(what, r); msg != "" {
			t.Error(msg)
		}
		return r, parseReport(r.Stdout)
	}
	setup := func(host, unit, config string) {
		t.Helper()
		f.write("config.yaml", config)
		f.write("registry-ssh.yaml", registry(host, unit))
		if err := os.MkdirAll(filepath.Join(f.storeURL, "state/services"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.storeURL, "state/services/registry.yaml"), []byte(registry(host, unit)), 0o644); err != nil {
			t.Fatal(err)
		}
		f.sim.set(unit, false)
		b := fmt.Sprintf(`{"schema_version":1,"host":%q,"reported_at":%q,"units":[{"unit":%q,"active_state":"failed"}]}`, host, nowRFC(), unit)
		if strings.HasPrefix(host, "-") {
			return // no beacon can be stored for it; the registry is refused first
		}
		if _, err := f.store.Put(context.Background(), "state/beacons/"+host+".json", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	sshRan := func() bool { _, err := os.Stat(sshLog); return err == nil }

	// 1. ssh actions without known_hosts: the local config is refused.
	setup("h00", "api.service", "channels:\n  ssh:\n    actions:\n      restart: [\"systemctl\", \"restart\", \"{unit}\"]\n")
	r, _ := tick("no known_hosts")
	if r.Code != 1 || !strings.Contains(r.Stderr, "known_hosts") || sshRan() {
		t.Errorf("ssh actions without known_hosts: exit %d (%s), ssh ran: %v", r.Code, lastLine(r.Stderr), sshRan())
	}
	// 2. No ssh section at all: the repair is refused, ssh never starts.
	setup("h00", "api.service", "channels: {}\n")
	r, rep := tick("no ssh section")
	if r.Code != 3 || rep == nil || rep.Outcomes[0].Classification != reports.RepairFailed || !strings.Contains(rep.Outcomes[0].Detail, "known_hosts") || sshRan() {
		t.Errorf("no ssh section: exit %d, %+v, ssh ran: %v", r.Code, rep, sshRan())
	}
	sshConfig := fmt.Sprintf("channels:\n  ssh:\n    known_hosts: %s\n    connect_timeout_seconds: 2\n    actions:\n      restart: [\"systemctl\", \"restart\", \"{unit}\"]\n", knownHosts)
	// 3. Hostile hosts in the stored registry: refused before anything runs.
	for _, host := range []string{"-oProxyCommand=touch /tmp/stado-owned", "-oProxyCommand=x", "-v"} {
		setup(host, "api.service", sshConfig)
		if r, _ := tick("hostile host " + host); r.Code != 1 || !strings.Contains(lastLine(r.Stderr), "registry") || sshRan() {
			t.Errorf("host %q: exit %d (%s), ssh ran: %v", host, r.Code, lastLine(r.Stderr), sshRan())
		}
		figures.add("security: hostile ssh hosts and units refused", 1)
	}
	for _, unit := range []string{"-oProxyCommand=x", "--help", "a b", "$(touch x)", "a;b"} {
		setup("h00", unit, sshConfig)
		if r, _ := tick("hostile unit " + unit); r.Code != 1 || sshRan() {
			t.Errorf("unit %q: exit %d (%s), ssh ran: %v", unit, r.Code, lastLine(r.Stderr), sshRan())
		}
		figures.add("security: hostile ssh hosts and units refused", 1)
	}
	// The same values through the commands that write them.
	f.write("hostile.yaml", registry("-oProxyCommand=x", "api.service"))
	if r := f.stado("service", "apply", "-f", filepath.Join(f.dir, "hostile.yaml")); r.Code != 1 {
		t.Errorf("service apply of a hostile host: exit %d", r.Code)
	}
	if r := f.stado("beacon", "publish", "--host", "-oProxyCommand=x", "--state", "a.service=failed"); r.Code == 0 {
		t.Errorf("beacon publish for a hostile host succeeded")
	}
	// 4. A host with a login in it: ssh would log in as root; refused.
	setup("root@h00", "api.service", sshConfig)
	r, rep = tick("user in host")
	if r.Code != 3 || rep == nil || rep.Outcomes[0].Classification != reports.RepairFailed || sshRan() {
		t.Errorf("host root@h00: exit %d, %+v, ssh ran: %v", r.Code, rep, sshRan())
	}
	// 5. A plain host: ssh runs, with strict host-key checking, and the
	// host after "--".
	setup("h00", "api.service", sshConfig)
	r, rep = tick("plain host")
	if r.Code != 3 || !sshRan() {
		t.Fatalf("plain host: exit %d, ssh ran: %v\n%s", r.Code, sshRan(), r.Stderr)
	}
	args := readTrim(sshLog)
	for _, want := range []string{"StrictHostKeyChecking=yes", "BatchMode=yes", "UserKnownHostsFile=" + knownHosts, "GlobalKnownHostsFile=/dev/null", " -- h00 "} {
		if !strings.Contains(args, want) {
			t.Errorf("ssh ran without %q: %s", want, args)
		}
	}
	if strings.Contains(args, "StrictHostKeyChecking=no") || strings.Contains(args, "accept-new") {
		t.Errorf("ssh ran with host-key checking relaxed: %s", args)
	}
	if n := strings.Count(args, "\nssh "); n != 0 {
		t.Errorf("ssh ran %d times, want once", n+1)
	}
	if rep != nil && rep.Outcomes[0].Classification != reports.RepairFailed {
		t.Errorf("a repair through an ssh that cannot connect: %+v", rep.Outcomes[0])
	}
}

func nowRFC() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z07:00") }
