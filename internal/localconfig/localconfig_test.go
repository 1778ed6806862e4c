package localconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseDesignExample(t *testing.T) {
	doc := `store: s3://fleet-state/prod?region=eu-west-1
channels:
  exec:
    actions:
      restart: ["/usr/local/bin/fleet-repair", "restart", "{host}", "{unit}"]
      start:   ["/usr/local/bin/fleet-repair", "start", "{host}", "{unit}"]
      check:   ["/usr/local/bin/fleet-check", "{host}", "{unit}"]
  ssh:
    user: stado
    port: 22
    identity_file: /etc/stado/id_ed25519
    known_hosts: /etc/stado/known_hosts
    connect_timeout_seconds: 10
    actions:
      restart: ["sudo", "systemctl", "restart", "{unit}"]
      check:   ["systemctl", "is-active", "--quiet", "{unit}"]
`
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != "s3://fleet-state/prod?region=eu-west-1" || len(c.Channels.Exec.Actions) != 3 || c.Channels.SSH.User != "stado" ||
		strings.Join(c.Channels.SSH.Actions["check"], " ") != "systemctl is-active --quiet {unit}" {
		t.Fatalf("parsed %+v", c)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"stor: x\n", `1:1: stor: unknown key "stor"`},
		{"channels:\n  ssh:\n    port: 70000\n", "3:11: channels.ssh.port: must be between 1 and 65535"},
		{"channels:\n  exec:\n    actions:\n      restart: []\n", "4:16: channels.exec.actions.restart: the command is empty"},
		{"channels:\n  ssh:\n    actions:\n      restart: [\"x\"]\n", "channels.ssh.known_hosts: is required"},
		{"channels:\n  ssh:\n    user: -oProxyCommand=x\n    known_hosts: /k\n", "must not start with '-'"},
		{"channels:\n  exec:\n    actions:\n      Re_Start: [\"/bin/true\"]\n", "action name \"Re_Start\""},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestLoadOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(dir, "home")
	write(filepath.Join(home, ".config", "stado", "config.yaml"), "store: /from/home\n")
	write(filepath.Join(dir, "env.yaml"), "store: /from/env\n")
	write(filepath.Join(dir, "flag.yaml"), "store: /from/flag\n")
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	if c, src, err := Load("", getenv); err != nil || c.Store != "/from/home" || !strings.HasSuffix(src.Path, "config.yaml") {
		t.Fatalf("home: %+v %v %v", c, src, err)
	}
	env["STADO_CONFIG"] = filepath.Join(dir, "env.yaml")
	if c, _, err := Load("", getenv); err != nil || c.Store != "/from/env" {
		t.Fatalf("env: %+v %v", c, err)
	}
	if c, _, err := Load(filepath.Join(dir, "flag.yaml"), getenv); err != nil || c.Store != "/from/flag" {
		t.Fatalf("flag: %+v %v", c, err)
	}
	if _, _, err := Load(filepath.Join(dir, "missing.yaml"), getenv); err == nil {
		t.Fatal("an explicitly named config that does not exist must be an error")
	}
	if c, src, err := Load("", func(string) string { return "" }); err != nil || src.Path != "" || c.Channels.SSH.Port != 22 {
		// /etc/stado/config.yaml does not exist on a test machine.
		t.Fatalf("defaults: %+v %v %v", c, src, err)
	}
	write(filepath.Join(dir, "bad.yaml"), "store: [1\n")
	if _, _, err := Load(filepath.Join(dir, "bad.yaml"), getenv); err == nil || !regexp.MustCompile(`bad\.yaml:\d+:\d+: `).MatchString(err.Error()) {
		t.Fatalf("invalid config error %v must name FILE:LINE", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("store: /x\nchannels:\n  exec:\n    actions:\n      restart: [\"/bin/true\"]\n"))
	f.Add([]byte("channels: {ssh: {port: 0}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil && c == nil {
			t.Fatal("nil config without error")
		}
	})
}
