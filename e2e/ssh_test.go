package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stado/stado/internal/sshtest"
	"github.com/stado/stado/reports"
)

// The ssh channel, end to end: a real OpenSSH server on 127.0.0.1 with its
// own host key, authorized key and known-hosts file; stado's tick restarts a
// killed service process on this machine through it.
func TestSSHChannelRestartsServiceThroughRealSSHD(t *testing.T) {
	srv := sshtest.Start(t)
	f := newFleet(t, "fs")
	api := f.newService("api", "127.0.0.1", "api.service", true)
	f.write("config.yaml", fmt.Sprintf(`channels:
  ssh:
    user: %s
    port: %d
    identity_file: %s
    known_hosts: %s
    connect_timeout_seconds: 5
    actions:
      restart: [%q, "e2e-repair", %q, "{host}", "{unit}"]
`, srv.User, srv.Port, srv.Identity, srv.KnownHosts, f.exe, f.dir))
	f.write("registry.yaml", fmt.Sprintf(`services:
  - name: api
    host: 127.0.0.1
    unit: api.service
    endpoint: http://%s/healthz
    repair: restart
    channel: ssh
`, api.Addr))
	f.must("service", "apply", "-f", f.dir+"/registry.yaml")
	f.applyPolicy(enforcePolicy)
	old := f.pid("api.service")
	f.kill("api.service")
	f.publish(map[string]map[string]string{"127.0.0.1": {"api.service": "failed"}})

	rep, res := f.run()
	o := outcome(t, rep, "api.service")
	if res.Code != 0 || o.Classification != reports.Reconciled {
		t.Fatalf("exit %d, %+v\n%s", res.Code, o, res.Stderr)
	}
	runs := f.repairs()
	if len(runs) != 1 || runs[0].Host != "127.0.0.1" || runs[0].Token == "" || runs[0].ExpiresAt.IsZero() {
		t.Fatalf("the repair did not run through ssh with the lease in its environment: %+v", runs)
	}
	if !up(api.Addr) || f.pid("api.service") == old {
		t.Fatal("the service is not back in a new process")
	}

	// A host key that is not in known_hosts: ssh refuses, nothing runs.
	f.write("known_hosts_other", strings.Replace(mustRead(t, srv.KnownHosts), srv.HostPub, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", 1))
	cfg := mustRead(t, f.config)
	f.write("config.yaml", strings.Replace(cfg, srv.KnownHosts, f.dir+"/known_hosts_other", 1))
	f.kill("api.service")
	rep, res = f.run()
	o = outcome(t, rep, "api.service")
	if res.Code != 3 || o.Classification != reports.RepairFailed || !strings.Contains(o.Detail, "ssh") {
		t.Fatalf("with a wrong host key: exit %d, %+v", res.Code, o)
	}
	if n := len(f.repairs()); n != 1 {
		t.Fatalf("a repair ran despite the unknown host key (%d runs)", n)
	}
}
