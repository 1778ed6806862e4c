// Package sshtest runs a real OpenSSH server for tests: Debian's sshd on
// 127.0.0.1, with its own freshly generated host key, one authorized client
// key and a known_hosts file. A missing sshd fails the test: the ssh channel
// is only proven against a real server, never skipped.
package sshtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stado/stado/internal/localconfig"
)

// InstallHint says how to get the server.
const InstallHint = "install OpenSSH with `apt-get update && apt-get install -y openssh-server openssh-client` (.ci/run does this)"

// Server is a real OpenSSH server on 127.0.0.1 with its own host key,
// accepting one freshly generated client key.
type Server struct {
	Port       int
	Dir        string
	HostPub    string // "ssh-ed25519 AAAA..."
	Identity   string // the client's private key
	KnownHosts string // a known_hosts file holding the server's key
	User       string
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Keygen generates an ed25519 key pair at path and returns the public key.
func Keygen(t testing.TB, path, comment string) string {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	return f[0] + " " + f[1]
}

// Start starts /usr/sbin/sshd in the foreground on a free port and stops it
// when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	const sshd = "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("%s is missing (%v): %s", sshd, err, InstallHint)
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: %s", tool, InstallHint)
		}
	}
	// sshd's privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("sshd needs /run/sshd: %v; create it as root (mkdir -p /run/sshd)", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: t.TempDir(), Port: FreePort(t), User: u.Username}
	s.HostPub = Keygen(t, filepath.Join(s.Dir, "host_ed25519"), "stado-test-host")
	s.Identity = filepath.Join(s.Dir, "client_ed25519")
	clientPub := Keygen(t, s.Identity, "stado-test-client")
	write := func(name, content string) string {
		p := filepath.Join(s.Dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("authorized_keys", clientPub+"\n")
	s.KnownHosts = write("known_hosts", fmt.Sprintf("[127.0.0.1]:%d %s\n", s.Port, s.HostPub))
	cfg := write("sshd_config", strings.Join([]string{
		"Port " + strconv.Itoa(s.Port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(s.Dir, "host_ed25519"),
		"PidFile " + filepath.Join(s.Dir, "sshd.pid"),
		"AuthorizedKeysFile " + filepath.Join(s.Dir, "authorized_keys"),
		"StrictModes no",
		"UsePAM no",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"LogLevel VERBOSE",
	}, "\n")+"\n")

	logPath := filepath.Join(s.Dir, "sshd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sshd log:\n%s", b)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
	for end := time.Now().Add(10 * time.Second); ; {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("sshd exited at startup:\n%s", b)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return s
		}
		if time.Now().After(end) {
			t.Fatalf("sshd is not listening on %s after 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Config is an ssh channel configuration that reaches this server.
func (s *Server) Config(actions map[string][]string) localconfig.SSHChannel {
	return localconfig.SSHChannel{
		User: s.User, Port: s.Port, IdentityFile: s.Identity, KnownHosts: s.KnownHosts,
		ConnectTimeoutSeconds: 5, Actions: actions,
	}
}
