// Package resp is a minimal Redis client: RESP2 over one TCP connection,
// enough for the lock every Redis user writes (SET key token NX PX ttl, and a
// compare-and-delete script). It exists so the benchmark needs no Go
// dependency beyond stado's own.
package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Conn is one connection; not safe for concurrent use.
type Conn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// Dial connects to addr (host:port).
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// ErrNil is the reply to a command that found nothing (RESP's null bulk).
var ErrNil = errors.New("redis: nil reply")

// Error is an error reply.
type Error string

func (e Error) Error() string { return "redis: " + string(e) }

// Do sends one command and reads its reply: a string (simple or bulk), an
// int64, a []any (array), or an error (ErrNil for a null reply, Error for an
// error reply).
func (c *Conn) Do(args ...string) (any, error) {
	c.w.WriteString("*")
	c.w.WriteString(strconv.Itoa(len(args)))
	c.w.WriteString("\r\n")
	for _, a := range args {
		c.w.WriteString("$")
		c.w.WriteString(strconv.Itoa(len(a)))
		c.w.WriteString("\r\n")
		c.w.WriteString(a)
		c.w.WriteString("\r\n")
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *Conn) line() ([]byte, error) {
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return nil, fmt.Errorf("redis: malformed reply line %q", l)
	}
	return l[:len(l)-2], nil
}

func (c *Conn) read() (any, error) {
	l, err := c.line()
	if err != nil {
		return nil, err
	}
	switch l[0] {
	case '+':
		return string(l[1:]), nil
	case '-':
		return nil, Error(l[1:])
	case ':':
		return strconv.ParseInt(string(l[1:]), 10, 64)
	case '$':
		n, err := strconv.Atoi(string(l[1:]))
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, ErrNil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(string(l[1:]))
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, ErrNil
		}
		out := make([]any, n)
		for i := range out {
			v, err := c.read()
			if err != nil && !errors.Is(err, ErrNil) {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unknown reply type %q", l[0])
}
