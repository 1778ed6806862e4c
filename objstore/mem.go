package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stado/stado/internal/clock"
)

// Mem is an in-memory Store for unit tests. Its clock is the injected clock,
// read exactly (no uncertainty), so tests can move store time by hand.
type Mem struct {
	clock clock.Clock
	mu    sync.Mutex
	objs  map[string]memObject
}

type memObject struct {
	body    []byte
	etag    string
	modTime time.Time
}

// NewMem returns an empty in-memory store whose clock is c.
func NewMem(c clock.Clock) *Mem {
	return &Mem{clock: c, objs: make(map[string]memObject)}
}

// contentETag is the ETag the fs and mem backends give a body: a hash of the
// bytes, like S3's MD5 ETag of a single-part upload.
func contentETag(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}

func cloneBytes(b []byte) []byte { return append([]byte(nil), b...) }

// Get implements Store.
func (m *Mem) Get(ctx context.Context, key string) (Object, error) {
	if err := ValidKey(key); err != nil {
		return Object{}, opError("get", key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return Object{}, opError("get", key, ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return Object{}, opError("get", key, ErrNotFound, nil)
	}
	return Object{Key: key, Body: cloneBytes(o.body), ETag: o.etag, ModTime: o.modTime}, nil
}

// Create implements Store.
func (m *Mem) Create(ctx context.Context, key string, body []byte) (string, error) {
	return m.write(ctx, "create", key, body, func(cur memObject, exists bool) error {
		if exists {
			return ErrPrecondition
		}
		return nil
	})
}

// PutIfMatch implements Store.
func (m *Mem) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	return m.write(ctx, "put-if-match", key, body, func(cur memObject, exists bool) error {
		if !exists || cur.etag != etag {
			return ErrPrecondition
		}
		return nil
	})
}

// Put implements Store.
func (m *Mem) Put(ctx context.Context, key string, body []byte) (string, error) {
	return m.write(ctx, "put", key, body, func(memObject, bool) error { return nil })
}

func (m *Mem) write(ctx context.Context, op, key string, body []byte, check func(memObject, bool) error) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", opError(op, key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return "", opError(op, key, ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.objs[key]
	if err := check(cur, exists); err != nil {
		return "", opError(op, key, err, nil)
	}
	o := memObject{body: cloneBytes(body), etag: contentETag(body), modTime: m.clock.Now()}
	m.objs[key] = o
	return o.etag, nil
}

// DeleteIfMatch implements Store.
func (m *Mem) DeleteIfMatch(ctx context.Context, key, etag string) error {
	if err := ValidKey(key); err != nil {
		return opError("delete-if-match", key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return opError("delete-if-match", key, ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.objs[key]
	if !ok {
		return opError("delete-if-match", key, ErrNotFound, nil)
	}
	if cur.etag != etag {
		return opError("delete-if-match", key, ErrPrecondition, nil)
	}
	delete(m.objs, key)
	return nil
}

// Delete implements Store.
func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return opError("delete", key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return opError("delete", key, ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

// List implements Store.
func (m *Mem) List(ctx context.Context, prefix string, fn func(Entry) error) error {
	if err := ctx.Err(); err != nil {
		return opError("list", prefix, ErrUnavailable, err)
	}
	m.mu.Lock()
	entries := make([]Entry, 0, len(m.objs))
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			entries = append(entries, Entry{Key: k, Size: int64(len(o.body)), ModTime: o.modTime})
		}
	}
	m.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
	for _, e := range entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Now implements Store: the injected clock, exactly.
func (m *Mem) Now(ctx context.Context) (TimeBounds, error) {
	if err := ctx.Err(); err != nil {
		return TimeBounds{}, opError("clock", "", ErrUnavailable, err)
	}
	t := m.clock.Now()
	return TimeBounds{Earliest: t, Latest: t}, nil
}

// Location implements Store.
func (m *Mem) Location() string { return "mem:" }
