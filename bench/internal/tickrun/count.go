package tickrun

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/stado/stado/objstore"
)

// Counter wraps a Store and counts requests by verb and by the kind of
// object they touch (beacon, lease, control, policy, registry, report), so
// that a tick's reads can be told apart from its repairs' requests.
type Counter struct {
	objstore.Store
	start  time.Time
	mu     sync.Mutex
	counts map[string]map[string]int64 // class → verb → n
	spans  map[string]*Span
}

// Span is when a class of requests was made during the tick, relative to
// the counter's creation, and how long they took in all.
type Span struct {
	FirstSeconds float64 `json:"first_s"`
	LastSeconds  float64 `json:"last_s"`
	// BusySeconds adds up every request's duration (requests overlap when
	// they run concurrently).
	BusySeconds float64 `json:"busy_s"`
}

// NewCounter wraps s.
func NewCounter(s objstore.Store) *Counter {
	return &Counter{Store: s, start: time.Now(), counts: map[string]map[string]int64{}, spans: map[string]*Span{}}
}

// Class names the kind of object key is.
func Class(key string) string {
	switch {
	case strings.HasPrefix(key, "state/beacons/"):
		return "beacon"
	case strings.HasPrefix(key, "state/autonomy/leases/"):
		return "lease"
	case key == "state/autonomy/control.json":
		return "control"
	case key == "state/autonomy/policy.yaml":
		return "policy"
	case key == "state/services/registry.yaml":
		return "registry"
	case strings.HasPrefix(key, "state/autonomy/services/"):
		return "report"
	}
	return "other"
}

func (c *Counter) add(verb, key string) func() {
	cl := Class(key)
	t0 := time.Now()
	c.mu.Lock()
	m := c.counts[cl]
	if m == nil {
		m = map[string]int64{}
		c.counts[cl] = m
	}
	m[verb]++
	c.mu.Unlock()
	return func() {
		t1 := time.Now()
		c.mu.Lock()
		sp := c.spans[cl]
		if sp == nil {
			sp = &Span{FirstSeconds: t0.Sub(c.start).Seconds()}
			c.spans[cl] = sp
		}
		sp.LastSeconds = max(sp.LastSeconds, t1.Sub(c.start).Seconds())
		sp.BusySeconds += t1.Sub(t0).Seconds()
		c.mu.Unlock()
	}
}

// Spans returns when each class of requests ran.
func (c *Counter) Spans() map[string]Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Span, len(c.spans))
	for k, v := range c.spans {
		out[k] = *v
	}
	return out
}

// Counts returns class → verb → requests.
func (c *Counter) Counts() map[string]map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]int64, len(c.counts))
	for cl, m := range c.counts {
		out[cl] = make(map[string]int64, len(m))
		for v, n := range m {
			out[cl][v] = n
		}
	}
	return out
}

func (c *Counter) Get(ctx context.Context, key string) (objstore.Object, error) {
	defer c.add("get", key)()
	return c.Store.Get(ctx, key)
}

func (c *Counter) Create(ctx context.Context, key string, body []byte) (string, error) {
	defer c.add("create", key)()
	return c.Store.Create(ctx, key, body)
}

func (c *Counter) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	defer c.add("put-if-match", key)()
	return c.Store.PutIfMatch(ctx, key, body, etag)
}

func (c *Counter) Put(ctx context.Context, key string, body []byte) (string, error) {
	defer c.add("put", key)()
	return c.Store.Put(ctx, key, body)
}

func (c *Counter) DeleteIfMatch(ctx context.Context, key, etag string) error {
	defer c.add("delete-if-match", key)()
	return c.Store.DeleteIfMatch(ctx, key, etag)
}

func (c *Counter) Delete(ctx context.Context, key string) error {
	defer c.add("delete", key)()
	return c.Store.Delete(ctx, key)
}

func (c *Counter) List(ctx context.Context, prefix string, fn func(objstore.Entry) error) error {
	defer c.add("list", prefix)()
	return c.Store.List(ctx, prefix, fn)
}
