package objstore

import (
	"context"
	"sync/atomic"
)

// Verb names one kind of Store request, as Counting counts them.
type Verb int

// The request verbs.
const (
	VerbGet Verb = iota
	VerbCreate
	VerbPutIfMatch
	VerbPut
	VerbDeleteIfMatch
	VerbDelete
	VerbList
	numVerbs
)

var verbNames = [numVerbs]string{"get", "create", "put-if-match", "put", "delete-if-match", "delete", "list"}

func (v Verb) String() string { return verbNames[v] }

// Counting wraps a Store and counts the requests made through it, by verb.
// A List counts once per call, however many pages it reads; Now is not
// counted (it costs a request only on a cold S3 clock, which the s3 backend's
// own Requests shows).
type Counting struct {
	Store
	counts [numVerbs]atomic.Int64
}

// NewCounting wraps s.
func NewCounting(s Store) *Counting { return &Counting{Store: s} }

// Counts returns the requests made so far, by verb name, omitting zeros.
func (c *Counting) Counts() map[string]int64 {
	out := make(map[string]int64)
	for v := Verb(0); v < numVerbs; v++ {
		if n := c.counts[v].Load(); n != 0 {
			out[v.String()] = n
		}
	}
	return out
}

// Total returns the number of requests made so far.
func (c *Counting) Total() int64 {
	var n int64
	for v := range c.counts {
		n += c.counts[v].Load()
	}
	return n
}

// Reset sets every count to zero.
func (c *Counting) Reset() {
	for v := range c.counts {
		c.counts[v].Store(0)
	}
}

func (c *Counting) Get(ctx context.Context, key string) (Object, error) {
	c.counts[VerbGet].Add(1)
	return c.Store.Get(ctx, key)
}

func (c *Counting) Create(ctx context.Context, key string, body []byte) (string, error) {
	c.counts[VerbCreate].Add(1)
	return c.Store.Create(ctx, key, body)
}

func (c *Counting) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	c.counts[VerbPutIfMatch].Add(1)
	return c.Store.PutIfMatch(ctx, key, body, etag)
}

func (c *Counting) Put(ctx context.Context, key string, body []byte) (string, error) {
	c.counts[VerbPut].Add(1)
	return c.Store.Put(ctx, key, body)
}

func (c *Counting) DeleteIfMatch(ctx context.Context, key, etag string) error {
	c.counts[VerbDeleteIfMatch].Add(1)
	return c.Store.DeleteIfMatch(ctx, key, etag)
}

func (c *Counting) Delete(ctx context.Context, key string) error {
	c.counts[VerbDelete].Add(1)
	return c.Store.Delete(ctx, key)
}

func (c *Counting) List(ctx context.Context, prefix string, fn func(Entry) error) error {
	c.counts[VerbList].Add(1)
	return c.Store.List(ctx, prefix, fn)
}

// Unwrap returns the wrapped store.
func (c *Counting) Unwrap() Store { return c.Store }
