package lease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// ProcessOwner names this process for Config.Owner as "host/pid/random":
// the host and pid tell an operator where a lease's holder runs, and the
// random part keeps two processes apart when a pid is reused.
func ProcessOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
