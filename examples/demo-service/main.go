// Command demo-service is the toy fleet of `make demo`: a small HTTP service,
// and the repair and check commands stado's exec channel runs for it.
//
//	demo-service serve ADDR            answer /healthz on ADDR
//	demo-service restart DIR UNIT      start UNIT's service again, detached
//	demo-service check DIR UNIT        exit 0 when UNIT's service answers
//	demo-service freeaddr              print a free 127.0.0.1 address
//
// DIR holds UNIT.addr (where the service listens) and receives UNIT.pid.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "freeaddr" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(l.Addr().String())
		l.Close()
		return
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: demo-service serve ADDR | restart DIR UNIT | check DIR UNIT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "ok from pid %d\n", os.Getpid()) })
		srv := &http.Server{Addr: os.Args[2], Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if err := srv.ListenAndServe(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "restart":
		os.Exit(restart(os.Args[2], os.Args[3]))
	case "check":
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + addr(os.Args[2], os.Args[3]) + "/healthz")
		if err != nil {
			os.Exit(3)
		}
		resp.Body.Close()
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func addr(dir, unit string) string {
	b, _ := os.ReadFile(filepath.Join(dir, unit+".addr"))
	return strings.TrimSpace(string(b))
}

// restart starts the unit's service in a session of its own, as systemd
// would, so it outlives the repair's process group.
func restart(dir, unit string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(exe, "serve", addr(dir, unit))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("started %s as pid %d\n", unit, cmd.Process.Pid)
	_ = os.WriteFile(filepath.Join(dir, unit+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	return 0
}
