package resp

import (
	"bufio"
	"errors"
	"net"
	"testing"
)

func TestReplies(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := &Conn{c: client, r: bufio.NewReader(client), w: bufio.NewWriter(client)}
	replies := "+OK\r\n$-1\r\n:1\r\n-ERR wrong\r\n$3\r\nabc\r\n*2\r\n$1\r\nx\r\n:7\r\n"
	go func() {
		r := bufio.NewReader(server)
		buf := make([]byte, 4096)
		// Answer each command once its bytes have arrived; the content
		// is not checked here.
		for range 6 {
			if _, err := r.Read(buf); err != nil {
				return
			}
			if len(replies) == 0 {
				return
			}
			var n int
			switch {
			case replies[0] == '*':
				n = len("*2\r\n$1\r\nx\r\n:7\r\n")
			case replies[0] == '$' && replies[1] != '-':
				n = len("$3\r\nabc\r\n")
			default:
				n = len(replies[:indexCRLF(replies)+2])
			}
			server.Write([]byte(replies[:n]))
			replies = replies[n:]
		}
	}()
	want := []any{"OK", ErrNil, int64(1), Error("ERR wrong"), "abc", []any{"x", int64(7)}}
	for i, w := range want {
		v, err := c.Do("PING")
		switch w := w.(type) {
		case error:
			if !errors.Is(err, w) && err.Error() != w.Error() {
				t.Fatalf("reply %d: %v, want error %v", i, err, w)
			}
		case []any:
			got, ok := v.([]any)
			if err != nil || !ok || len(got) != 2 || got[0] != "x" || got[1] != int64(7) {
				t.Fatalf("reply %d: %v %v", i, v, err)
			}
		default:
			if err != nil || v != w {
				t.Fatalf("reply %d: %v %v, want %v", i, v, err, w)
			}
		}
	}
}

func indexCRLF(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '\r' && s[i+1] == '\n' {
			return i
		}
	}
	return len(s)
}
