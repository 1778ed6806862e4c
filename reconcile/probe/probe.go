// Package probe owns the reconciler's own look at a declared service: one
// request to its endpoint, judged into one of the four verdicts of DESIGN §8,
// and the rule for what an endpoint may be (ParseEndpoint, which the registry
// validates declarations with).
//
// The verdicts are asymmetric on purpose. A repair is planned only when
// absence is proven, so only an answer that proves nothing is listening
// (connection refused) or that the service itself says it is broken (HTTP
// 5xx) counts as unreachable. A timeout, a DNS failure or a TLS failure proves
// only that this prober could not tell: the service may be fine and the
// network in between broken, and repairing a healthy service on that evidence
// is exactly the mistake autonomy must not make.
package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/stado/stado/internal/clock"
)

// Verdict is what one probe proved about an endpoint (DESIGN §8).
type Verdict string

// The verdicts. Their strings are part of the report format.
const (
	// Unreachable: absence proven (connection refused, or HTTP 500 or more).
	Unreachable Verdict = "unreachable"
	// Observed: something answered (HTTP 2xx/3xx/4xx, or a TCP connection
	// was accepted).
	Observed Verdict = "observed"
	// Unverified: the prober could not tell (timeout, DNS, TLS or any other
	// failure); absence is not proven.
	Unverified Verdict = "unverified"
	// NotProbed: no endpoint is declared.
	NotProbed Verdict = "not-probed"
)

// String returns the verdict as reports spell it.
func (v Verdict) String() string { return string(v) }

// Result is the outcome of one probe.
type Result struct {
	Verdict Verdict
	// Detail is a short operator-facing reason: "connection refused",
	// "HTTP 503", "timeout after 5s", "TLS: …". It may quote what a server
	// sent, so a caller writing it to a terminal escapes control characters.
	Detail string
	// Duration is how long the probe took (zero when nothing was probed).
	Duration time.Duration
}

// Limits.
const (
	// MaxEndpointLen is the longest endpoint accepted, in bytes.
	MaxEndpointLen = 2048
	// DefaultTimeout bounds a probe given no timeout (the policy default).
	DefaultTimeout = 5 * time.Second
	// maxBody is how much of a response body is read. The status line is the
	// verdict; the body is read only so that a well-behaved server sees a
	// complete exchange, and never past this, whatever it sends.
	maxBody = 64 << 10
	// maxHeaderBytes bounds the response headers a server may send.
	maxHeaderBytes = 64 << 10
	// maxDetail bounds Detail, which can quote a server's bytes.
	maxDetail = 200
)

// ParseEndpoint checks that raw is an endpoint this package can probe:
// http://HOST[:PORT]/PATH, https://… or tcp://HOST:PORT. The error says what
// is wrong and what to write instead.
func ParseEndpoint(raw string) (*url.URL, error) {
	const forms = "write http://HOST[:PORT]/PATH, https://HOST[:PORT]/PATH or tcp://HOST:PORT"
	if len(raw) > MaxEndpointLen {
		return nil, fmt.Errorf("endpoint is %d bytes long, more than the %d allowed; shorten it", len(raw), MaxEndpointLen)
	}
	if strings.TrimSpace(raw) != raw || raw == "" {
		return nil, fmt.Errorf("endpoint %s is empty or has leading or trailing spaces; %s", quote(raw), forms)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("endpoint %s is not a valid URL (%v); %s", quote(raw), err, forms)
	}
	switch u.Scheme {
	case "http", "https", "tcp":
	case "":
		return nil, fmt.Errorf("endpoint %s has no scheme; %s", quote(raw), forms)
	default:
		return nil, fmt.Errorf("endpoint %s: scheme %s is not supported; %s", quote(raw), quote(u.Scheme), forms)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("endpoint %s names no host; %s", quote(raw), forms)
	}
	if u.User != nil {
		// The registry is stored in the shared store and printed by
		// `stado service list`: it is no place for a secret.
		return nil, fmt.Errorf("endpoint %s carries credentials (user@ or user:password@); the registry is shared and printed, so remove them and probe an endpoint that needs none", quote(raw))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("endpoint %s: port %s is not between 1 and 65535; write a valid port", quote(raw), quote(p))
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, fmt.Errorf("endpoint %s has an empty port after \":\"; write a port or remove the colon", quote(raw))
	}
	if u.Scheme == "tcp" {
		switch {
		case u.Port() == "":
			return nil, fmt.Errorf("endpoint %s names no port; a tcp endpoint is tcp://HOST:PORT", quote(raw))
		case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
			return nil, fmt.Errorf("endpoint %s has a path, query or fragment, which a TCP connection cannot use; write tcp://HOST:PORT", quote(raw))
		}
	}
	return u, nil
}

// Prober probes endpoints. The zero value is ready to use: it dials directly
// (never through a proxy: a proxy's own 502 would look like proof that the
// service is down) and trusts the system's certificate roots.
type Prober struct {
	// DialContext dials TCP connections; nil uses a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is the TLS client configuration for https endpoints; nil
	// uses the defaults (system roots).
	TLSConfig *tls.Config
	// Clock measures Result.Duration; nil uses the real clock.
	Clock clock.Clock

	once   sync.Once
	client *http.Client
}

var defaultProber = &Prober{}

// Probe probes one endpoint with the default Prober.
func Probe(ctx context.Context, endpoint string, timeout time.Duration) Result {
	return defaultProber.Probe(ctx, endpoint, timeout)
}

// ProbeAll probes many endpoints with the default Prober.
func ProbeAll(ctx context.Context, endpoints []string, concurrency int, timeout time.Duration) []Result {
	return defaultProber.ProbeAll(ctx, endpoints, concurrency, timeout)
}

func (p *Prober) clock() clock.Clock {
	if p.Clock == nil {
		return clock.Real{}
	}
	return p.Clock
}

func (p *Prober) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.DialContext != nil {
		return p.DialContext(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (p *Prober) httpClient() *http.Client {
	p.once.Do(func() {
		var tlsConf *tls.Config
		if p.TLSConfig != nil {
			tlsConf = p.TLSConfig.Clone()
		}
		p.client = &http.Client{
			Transport: &http.Transport{
				Proxy:           nil,
				DialContext:     p.dial,
				TLSClientConfig: tlsConf,
				// Every probe opens its own connection: an idle connection
				// kept from an earlier probe proves nothing about now.
				DisableKeepAlives:      true,
				DisableCompression:     true,
				MaxResponseHeaderBytes: maxHeaderBytes,
			},
			// A redirect is an answer: the service is there. Following it
			// would probe some other endpoint.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	})
	return p.client
}

// Probe probes one endpoint, bounded by timeout (DefaultTimeout when it is
// not positive) and by ctx. An empty endpoint is NotProbed. It never panics
// and always returns a verdict.
func (p *Prober) Probe(ctx context.Context, endpoint string, timeout time.Duration) Result {
	if endpoint == "" {
		return Result{Verdict: NotProbed, Detail: "no endpoint declared"}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	u, err := ParseEndpoint(endpoint)
	if err != nil {
		return Result{Verdict: Unverified, Detail: clip("cannot probe: " + err.Error())}
	}
	start := p.clock().Now()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r Result
	if u.Scheme == "tcp" {
		r = p.probeTCP(ctx, pctx, u.Host, timeout)
	} else {
		r = p.probeHTTP(ctx, pctx, endpoint, timeout)
	}
	r.Duration = p.clock().Now().Sub(start)
	return r
}

func (p *Prober) probeTCP(parent, ctx context.Context, addr string, timeout time.Duration) Result {
	conn, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return failure(parent, err, timeout)
	}
	_ = conn.Close()
	return Result{Verdict: Observed, Detail: "TCP connection accepted"}
}

func (p *Prober) probeHTTP(parent, ctx context.Context, endpoint string, timeout time.Duration) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return Result{Verdict: Unverified, Detail: clip("cannot build the request: " + err.Error())}
	}
	req.Header.Set("User-Agent", "stado-probe/1")
	resp, err := p.httpClient().Do(req)
	if err != nil {
		return failure(parent, err, timeout)
	}
	// The status is the verdict; an error while draining the body changes
	// nothing about it.
	_, _ = io.CopyN(io.Discard, resp.Body, maxBody)
	_ = resp.Body.Close()
	detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if resp.StatusCode >= 500 {
		return Result{Verdict: Unreachable, Detail: detail}
	}
	return Result{Verdict: Observed, Detail: detail}
}

// failure judges a probe that got no HTTP answer or TCP connection. Only a
// refused connection proves absence; everything else is unverified, with the
// most specific reason that can be told.
func failure(parent context.Context, err error, timeout time.Duration) Result {
	unverified := func(detail string) Result { return Result{Verdict: Unverified, Detail: clip(detail)} }
	var (
		dnsErr *net.DNSError
		netErr net.Error
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Result{Verdict: Unreachable, Detail: "connection refused"}
	case parent.Err() != nil:
		return unverified("probe canceled: " + parent.Err().Error())
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return unverified(fmt.Sprintf("DNS: no such host %s", dnsErr.Name))
		}
		return unverified(fmt.Sprintf("DNS: cannot resolve %s: %s", dnsErr.Name, dnsErr.Err))
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return unverified("timeout after " + timeout.String())
	case isTLS(err):
		return unverified("TLS: " + tlsReason(err))
	}
	return unverified(innermost(err))
}

func isTLS(err error) bool {
	var (
		verr   *tls.CertificateVerificationError
		rec    tls.RecordHeaderError
		alert  tls.AlertError
		unkCA  x509.UnknownAuthorityError
		host   x509.HostnameError
		invCrt x509.CertificateInvalidError
	)
	return errors.As(err, &verr) || errors.As(err, &rec) || errors.As(err, &alert) ||
		errors.As(err, &unkCA) || errors.As(err, &host) || errors.As(err, &invCrt) ||
		strings.Contains(err.Error(), "tls: ")
}

// tlsReason is the TLS failure without the layers of wrapping around it.
func tlsReason(err error) string {
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) && verr.Err != nil {
		return verr.Err.Error()
	}
	msg := innermost(err)
	if i := strings.Index(msg, "tls: "); i >= 0 {
		msg = msg[i+len("tls: "):]
	}
	return msg
}

// innermost drops the "Get "http://…": dial tcp …:" prefixes an HTTP client
// error carries: the operator knows which endpoint was probed.
func innermost(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// clip bounds a detail's length; a server or resolver chose part of it.
func clip(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func quote(s string) string {
	const maxRunes = 80
	if utf8.RuneCountInString(s) > maxRunes {
		return strconv.Quote(string([]rune(s)[:maxRunes])) + "…"
	}
	return strconv.Quote(s)
}

// ProbeAll probes every endpoint, at most concurrency at once (at least one),
// each bounded by timeout, and returns one Result per endpoint, in order.
// Identical endpoints are probed once and share the Result; an empty
// endpoint is NotProbed and costs nothing.
func (p *Prober) ProbeAll(ctx context.Context, endpoints []string, concurrency int, timeout time.Duration) []Result {
	results := make([]Result, len(endpoints))
	where := make(map[string][]int)
	var unique []string
	for i, e := range endpoints {
		if e == "" {
			results[i] = Result{Verdict: NotProbed, Detail: "no endpoint declared"}
			continue
		}
		if _, seen := where[e]; !seen {
			unique = append(unique, e)
		}
		where[e] = append(where[e], i)
	}
	if len(unique) == 0 {
		return results
	}
	concurrency = max(1, min(concurrency, len(unique)))
	jobs := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				r := p.Probe(ctx, e, timeout)
				// Each endpoint's indices belong to one worker only.
				for _, i := range where[e] {
					results[i] = r
				}
			}
		}()
	}
	for _, e := range unique {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	return results
}
