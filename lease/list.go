package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stado/stado/objstore"
)

// Listed is one stored lease object as List found it.
type Listed struct {
	Key     string
	Record  Record
	ModTime time.Time
	// Err is set (wrapping ErrUnreadable) when the object is not a valid
	// lease; Record is then zero.
	Err error
}

// List reads every stored lease object: one listing and one read per lease.
// For operators (`stado optimize status`); the lease operations never need
// it. Objects deleted between the listing and the read are left out.
func List(ctx context.Context, store objstore.Store) ([]Listed, error) {
	var keys []objstore.Entry
	if err := store.List(ctx, Prefix, func(e objstore.Entry) error { keys = append(keys, e); return nil }); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	out := make([]Listed, 0, len(keys))
	for _, e := range keys {
		o, err := store.Get(ctx, e.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read lease %s: %w", e.Key, err)
		}
		rec, perr := ParseRecord(o.Body)
		out = append(out, Listed{Key: e.Key, Record: rec, ModTime: o.ModTime, Err: perr})
	}
	return out, nil
}
