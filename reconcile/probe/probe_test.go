package probe

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func statusServer(t *testing.T, code int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		}
		w.WriteHeader(code)
		fmt.Fprintln(w, "body")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// closedPort returns an address on which nothing listens: a port that was
// just bound and released.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentListener accepts connections and never writes a byte.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

func TestProbeVerdicts(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	tcpAccepting := silentListener(t)

	cases := []struct {
		name     string
		endpoint string
		timeout  time.Duration
		verdict  Verdict
		detail   string // exact, or a prefix when it ends in "*"
	}{
		{"200", statusServer(t, 200).URL + "/healthz", time.Second, Observed, "HTTP 200"},
		{"302 is an answer, not followed", statusServer(t, 302).URL, time.Second, Observed, "HTTP 302"},
		{"404", statusServer(t, 404).URL, time.Second, Observed, "HTTP 404"},
		{"500", statusServer(t, 500).URL, time.Second, Unreachable, "HTTP 500"},
		{"503", statusServer(t, 503).URL, time.Second, Unreachable, "HTTP 503"},
		{"refused http", "http://" + closedPort(t) + "/healthz", time.Second, Unreachable, "connection refused"},
		{"refused tcp", "tcp://" + closedPort(t), time.Second, Unreachable, "connection refused"},
		{"never answers", "http://" + silentListener(t) + "/", 200 * time.Millisecond, Unverified, "timeout after 200ms"},
		{"untrusted certificate", tlsSrv.URL, time.Second, Unverified, "TLS: x509: certificate signed by unknown authority"},
		{"DNS", "http://stado-probe-test.invalid:8080/healthz", 3 * time.Second, Unverified, "DNS: *"},
		{"tcp accepted", "tcp://" + tcpAccepting, time.Second, Observed, "TCP connection accepted"},
		{"not probed", "", time.Second, NotProbed, "no endpoint declared"},
		{"invalid endpoint", "ftp://web-1/", time.Second, Unverified, "cannot probe: endpoint \"ftp://web-1/\": scheme \"ftp\" is not supported*"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := Probe(context.Background(), c.endpoint, c.timeout)
			if r.Verdict != c.verdict {
				t.Errorf("verdict %s (%s), want %s", r.Verdict, r.Detail, c.verdict)
			}
			if prefix, ok := strings.CutSuffix(c.detail, "*"); ok {
				if !strings.HasPrefix(r.Detail, prefix) {
					t.Errorf("detail %q, want prefix %q", r.Detail, prefix)
				}
			} else if r.Detail != c.detail {
				t.Errorf("detail %q, want %q", r.Detail, c.detail)
			}
		})
	}
}

func TestVerdictStrings(t *testing.T) {
	for v, want := range map[Verdict]string{Unreachable: "unreachable", Observed: "observed", Unverified: "unverified", NotProbed: "not-probed"} {
		if v.String() != want {
			t.Errorf("%v.String() = %q, want %q", v, v.String(), want)
		}
	}
}

// TestRedirectNotFollowed: the redirect target must never be asked.
func TestRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	src := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer src.Close()
	r := Probe(context.Background(), src.URL, time.Second)
	if r.Verdict != Observed || r.Detail != "HTTP 302" || hits.Load() != 0 {
		t.Fatalf("got %+v with %d hits on the redirect target; want observed HTTP 302 and none", r, hits.Load())
	}
}

// TestBodyReadIsBounded: a server streaming an endless body gets an answer
// and a closed connection, not a prober that reads until its timeout.
func TestBodyReadIsBounded(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	r := Probe(context.Background(), srv.URL, 10*time.Second)
	if r.Verdict != Observed || r.Detail != "HTTP 200" {
		t.Fatalf("got %+v, want observed HTTP 200", r)
	}
	srv.Close() // waits for the handler, which ends when its writes fail
	// An unbounded read would drain gigabytes over loopback in 10s; a
	// bounded one leaves the server stuck at its socket buffers.
	if w := written.Load(); w > 64<<20 {
		t.Errorf("the server wrote %d bytes before the prober hung up", w)
	}
}

func TestParentCancelIsUnverified(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Probe(ctx, "http://"+silentListener(t)+"/", time.Second)
	if r.Verdict != Unverified || !strings.HasPrefix(r.Detail, "probe canceled") {
		t.Fatalf("got %+v, want unverified: probe canceled", r)
	}
}

// TestInjectedDialer: the dialer is what the prober connects with.
func TestInjectedDialer(t *testing.T) {
	srv := statusServer(t, 204)
	var dialed atomic.Int32
	p := &Prober{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	r := p.Probe(context.Background(), "http://web-1.example:8080/healthz", time.Second)
	if r.Verdict != Observed || r.Detail != "HTTP 204" || dialed.Load() != 1 {
		t.Fatalf("got %+v after %d dials", r, dialed.Load())
	}
}

// TestProbeAllConcurrencyLimit: a server that holds each request until the
// limit is in flight sees exactly the limit at once: never more (the limit
// holds) and no fewer (probes do run in parallel).
func TestProbeAllConcurrencyLimit(t *testing.T) {
	const limit, n = 3, 12
	var inflight, peak, total atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := inflight.Add(1)
		total.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		giveUp := time.Now().Add(2 * time.Second)
		for inflight.Load() < limit && time.Now().Before(giveUp) {
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		inflight.Add(-1)
	}))
	defer srv.Close()
	eps := make([]string, n)
	for i := range eps {
		eps[i] = fmt.Sprintf("%s/healthz?i=%d", srv.URL, i)
	}
	results := ProbeAll(context.Background(), eps, limit, 5*time.Second)
	for i, r := range results {
		if r.Verdict != Observed {
			t.Errorf("endpoint %d: %+v", i, r)
		}
	}
	if peak.Load() != limit || total.Load() != n {
		t.Errorf("peak concurrency %d over %d requests; want %d over %d", peak.Load(), total.Load(), limit, n)
	}
}

func TestProbeAllDeduplicatesAndKeepsOrder(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/down" {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	up, down := srv.URL+"/up", srv.URL+"/down"
	eps := []string{up, "", down, up, up, down}
	results := ProbeAll(context.Background(), eps, 4, time.Second)
	want := []Verdict{Observed, NotProbed, Unreachable, Observed, Observed, Unreachable}
	for i, r := range results {
		if r.Verdict != want[i] {
			t.Errorf("result %d: %s, want %s", i, r.Verdict, want[i])
		}
	}
	if hits.Load() != 2 {
		t.Errorf("%d requests for 2 distinct endpoints", hits.Load())
	}
}

func TestParseEndpoint(t *testing.T) {
	good := []string{
		"http://web-1:8080/healthz", "https://web-1/", "http://10.0.0.1/x?y=1", "tcp://db-1:5432",
		"http://[::1]:8080/", "tcp://[fe80::1]:22", "HTTP://web-1/",
	}
	for _, e := range good {
		if _, err := ParseEndpoint(e); err != nil {
			t.Errorf("ParseEndpoint(%q): %v", e, err)
		}
	}
	bad := map[string]string{
		"":                     "is empty",
		" http://web-1/":       "leading or trailing spaces",
		"web-1:8080":           "scheme \"web-1\" is not supported",
		"//web-1/":             "has no scheme",
		"ftp://web-1/":         "scheme \"ftp\" is not supported",
		"http:///healthz":      "names no host",
		"http:web-1":           "names no host",
		"tcp://db-1":           "names no port",
		"tcp://db-1:5432/x":    "has a path",
		"tcp://db-1:0":         "not between 1 and 65535",
		"http://web-1:99999/":  "not between 1 and 65535",
		"http://web-1:/":       "empty port",
		"http://u:p@web-1/":    "carries credentials",
		"http://web 1/":        "not a valid URL",
		"http://web-1/\x1b[2J": "not a valid URL",
		"http://" + strings.Repeat("a", MaxEndpointLen): "more than the 2048 allowed",
	}
	for e, want := range bad {
		_, err := ParseEndpoint(e)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEndpoint(%q) = %v, want an error containing %q", e, err, want)
		}
	}
}
