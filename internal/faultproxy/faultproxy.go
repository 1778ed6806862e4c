// Package faultproxy is an HTTP proxy that sits between stado and an S3
// server in tests and injects the faults production stores produce: 5xx and
// SlowDown answers, reset connections, delays past timeouts, responses lost
// after the request committed, and a server clock that is off.
package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Action is what a rule does to a request it matches.
type Action int

const (
	// Status answers with Rule.Status and an S3 error body without
	// forwarding: the request did not commit.
	Status Action = iota + 1
	// CommitThenStatus forwards the request, discards the server's answer
	// and answers Rule.Status instead: the request committed, the client
	// believes it failed.
	CommitThenStatus
	// Reset closes the client's connection without forwarding.
	Reset
	// CommitThenReset forwards the request, then closes the client's
	// connection without an answer.
	CommitThenReset
	// Delay waits Rule.Delay, then forwards.
	Delay
)

func (a Action) String() string {
	switch a {
	case Status:
		return "status"
	case CommitThenStatus:
		return "commit-then-status"
	case Reset:
		return "reset"
	case CommitThenReset:
		return "commit-then-reset"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Rule injects one fault.
type Rule struct {
	// Method and PathContains select requests; empty matches all.
	Method       string
	PathContains string
	// Match, when set, must also accept the request.
	Match func(r *http.Request) bool
	// Times is how many matching requests the rule affects (0: all).
	Times int
	// Probability in (0,1] applies the rule to that share of matching
	// requests (0 means 1); Rand must be set when it is below 1.
	Probability float64
	Rand        func() float64

	Action Action
	Status int           // for Status and CommitThenStatus (default 503)
	Code   string        // S3 error code in the body (default by status)
	Delay  time.Duration // for Delay

	fired int
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	URL    string
	target *url.URL
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	mu         sync.Mutex
	rules      []*Rule
	dateOffset time.Duration
	injected   map[string]int
	forwarded  int
}

// Start starts a proxy on 127.0.0.1 in front of target (an http:// URL).
func Start(target string) (*Proxy, error) {
	tu, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:      "http://" + ln.Addr().String(),
		target:   tu,
		ln:       ln,
		client:   &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}},
		injected: make(map[string]int),
	}
	p.srv = &http.Server{Handler: p}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// Add installs rules; the first matching rule that still fires applies.
func (p *Proxy) Add(rules ...*Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, rules...)
}

// Clear removes every rule.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// SetDateOffset shifts the Date header of every answer by d, as a server
// whose clock is off would send it.
func (p *Proxy) SetDateOffset(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dateOffset = d
}

// Injected returns how many faults were injected, by action name.
func (p *Proxy) Injected() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Forwarded returns how many requests reached the server.
func (p *Proxy) Forwarded() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded
}

func (p *Proxy) pick(r *http.Request) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if rule.Method != "" && rule.Method != r.Method {
			continue
		}
		if rule.PathContains != "" && !strings.Contains(r.URL.Path, rule.PathContains) {
			continue
		}
		if rule.Match != nil && !rule.Match(r) {
			continue
		}
		if rule.Times > 0 && rule.fired >= rule.Times {
			continue
		}
		if rule.Probability > 0 && rule.Probability < 1 && rule.Rand() >= rule.Probability {
			continue
		}
		rule.fired++
		p.injected[rule.Action.String()]++
		return rule
	}
	return nil
}

// ServeHTTP forwards r, applying the first matching rule.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	rule := p.pick(r)
	if rule != nil {
		switch rule.Action {
		case Status:
			p.writeError(w, rule)
			return
		case Reset:
			p.reset(w)
			return
		case Delay:
			select {
			case <-time.After(rule.Delay):
			case <-r.Context().Done():
				return
			}
		}
	}
	resp, err := p.forward(r, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	respBody, _ := io.ReadAll(resp.Body)
	if rule != nil {
		switch rule.Action {
		case CommitThenStatus:
			p.writeError(w, rule)
			return
		case CommitThenReset:
			p.reset(w)
			return
		}
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	p.shiftDate(w.Header())
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

func (p *Proxy) forward(r *http.Request, body []byte) (*http.Response, error) {
	u := *p.target
	u.Path = r.URL.Path
	u.RawPath = r.URL.RawPath
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	// The request is signed for the host the client dialled.
	out.Host = r.Host
	out.ContentLength = int64(len(body))
	resp, err := p.client.Do(out)
	if err == nil {
		p.mu.Lock()
		p.forwarded++
		p.mu.Unlock()
	}
	return resp, err
}

func (p *Proxy) shiftDate(h http.Header) {
	p.mu.Lock()
	off := p.dateOffset
	p.mu.Unlock()
	if off == 0 {
		return
	}
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		h.Set("Date", d.Add(off).UTC().Format(http.TimeFormat))
	}
}

func (p *Proxy) writeError(w http.ResponseWriter, rule *Rule) {
	status := rule.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	code := rule.Code
	if code == "" {
		switch status {
		case http.StatusServiceUnavailable:
			code = "SlowDown"
		case http.StatusInternalServerError:
			code = "InternalError"
		default:
			code = http.StatusText(status)
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
	p.shiftDate(w.Header())
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by faultproxy</Message></Error>`, code)
}

func (p *Proxy) reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST, not FIN
	}
	_ = conn.Close()
}
