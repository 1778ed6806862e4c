// Package lease owns the lease atom over an objstore.Store: time-bounded,
// exclusive standing over one mutation subject, held by whoever wrote it
// first and taken over only after it expires.
//
// A grant ends at its release or at its instant (expires_at), never at any
// other event: nothing here observes a holder's death, so a killed holder's
// lease stays held until its instant passes. Instants are minted and judged on
// the store's clock (objstore.Store.Now), never on the local wall clock:
// "expired" is judged on the earliest the store's time can be, a holder's
// remaining term and fence on the latest.
//
// Every state change is one conditional write: create-if-absent to take a
// free key, compare-and-swap against the exact version read to take over an
// expired one, delete-if-match against the version this grant wrote to
// release. Two reconcilers therefore never both hold one subject, whatever
// their clocks say.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

// Errors callers branch on.
var (
	// ErrHeld: try-take found the subject held by another grant. The error
	// is a *HeldError saying by whom and until when.
	ErrHeld = errors.New("lease held")
	// ErrUnavailable: take waited its whole arrival term and the subject
	// did not become free.
	ErrUnavailable = errors.New("lease unavailable within the arrival term")
	// ErrNotHeld: renew on a grant whose term has passed or whose lease is
	// no longer the one it wrote.
	ErrNotHeld = errors.New("lease not held")
	// ErrBadTTL: a term outside (0, MaxTTL].
	ErrBadTTL = errors.New("invalid lease term")
)

// HeldError says who holds a subject. errors.Is(err, ErrHeld) is true.
type HeldError struct {
	Subject string
	Holder  string
	Owner   string
	// ExpiresAt is the holder's instant on the store clock. For an
	// unreadable object it is the instant the object may be taken over
	// (modification time plus the longest allowed term).
	ExpiresAt time.Time
	// Unreadable is set when the stored object is not a valid lease.
	Unreadable bool
}

func (e *HeldError) Error() string {
	if e.Holder == "" && !e.Unreadable {
		return fmt.Sprintf("lease on %s is changing hands between other takers faster than it can be read; treating it as held", e.Subject)
	}
	if e.Unreadable {
		return fmt.Sprintf("lease on %s: the stored lease object is unreadable; it is treated as held until %s",
			e.Subject, e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("lease on %s is held by %s (owner %s) until %s",
		e.Subject, e.Holder, e.Owner, e.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// ReleaseResult is release's answer.
type ReleaseResult int

const (
	// Released: this grant's lease was deleted; the subject is free.
	Released ReleaseResult = iota + 1
	// NotHeld: this grant's term has passed (or ends within the release
	// margin and is left to end at its instant), or it was already
	// released. Not a failure, and nothing was written.
	NotHeld
	// OwnershipChanged: while this grant's term had not passed, its lease
	// was overwritten or removed by someone else. Whatever was done under
	// the grant may have overlapped another holder: report it.
	OwnershipChanged
)

func (r ReleaseResult) String() string {
	switch r {
	case Released:
		return "released"
	case NotHeld:
		return "not-held"
	case OwnershipChanged:
		return "ownership-changed"
	}
	return fmt.Sprintf("ReleaseResult(%d)", int(r))
}

// Defaults of Config.
const (
	DefaultMaxTTL        = 86400 * time.Second
	DefaultReleaseMargin = 2 * time.Second
	DefaultPollInterval  = 500 * time.Millisecond
	// modTimeResolution is the resolution of a stored object's
	// modification time (S3's Last-Modified is whole seconds).
	modTimeResolution = time.Second
)

// Config configures a Manager.
type Config struct {
	// Holder names the party (DESIGN: "service-reconciler", shared by every
	// reconciler). Required.
	Holder string
	// Owner names the process, for operators ("host/pid/random";
	// ProcessOwner makes one). Required.
	Owner string
	// Clock is the local clock: it is used for sleeping and for turning a
	// fence into a local monotonic deadline, never to judge an instant.
	Clock clock.Clock
	// MaxTTL is the longest term anyone may ask for. An unreadable lease
	// object is not taken over before its modification time plus MaxTTL,
	// and a stored lease claiming a longer term is unreadable.
	MaxTTL time.Duration
	// ReleaseMargin: a release this close to the grant's instant writes
	// nothing and lets the grant end at its instant, so that it can never
	// race a takeover of the same version (some S3 servers do not exclude a
	// conditional put while they run a conditional delete).
	ReleaseMargin time.Duration
	// PollInterval is how often take re-tries a held key while it waits.
	PollInterval time.Duration
	// NewToken mints grant tokens (default: UUID v4).
	NewToken func() string
}

// Manager takes and releases leases for one holder and owner.
type Manager struct {
	store objstore.Store
	cfg   Config

	// exists remembers keys seen to exist, so that the next try-take on
	// them reads first instead of attempting a create that would fail. It
	// is only a hint: every decision is still one conditional write.
	exists sync.Map
}

// NewManager returns a Manager over store.
func NewManager(store objstore.Store, cfg Config) (*Manager, error) {
	if cfg.Holder == "" || cfg.Owner == "" {
		return nil, errors.New("lease manager: holder and owner are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.ReleaseMargin <= 0 {
		cfg.ReleaseMargin = DefaultReleaseMargin
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.NewToken == nil {
		cfg.NewToken = func() string { return uuid.NewString() }
	}
	return &Manager{store: store, cfg: cfg}, nil
}

// Holder returns the manager's holder.
func (m *Manager) Holder() string { return m.cfg.Holder }

// Grant is one successful take: a term of standing over a subject, told
// apart from every other grant by its token.
type Grant struct {
	Record
	key  string
	etag string // the version this grant wrote

	mu       sync.Mutex
	released bool
}

// Key returns the object key of the grant's lease.
func (g *Grant) Key() string { return g.key }

// Fence is the instant a fenced party must refuse this grant's work after,
// and the same instant as a local monotonic deadline.
type Fence struct {
	// Instant is on the store's clock: ExpiresAt minus the allowance.
	Instant time.Time
	// Deadline is on the local clock and carries its monotonic reading; it
	// is no later than the local moment the store's clock can first reach
	// Instant.
	Deadline time.Time
}

// Prime lists the lease prefix once and remembers which subjects have a
// lease object, so that try-take on them costs one read instead of a failed
// create plus a read. One request per thousand leases.
func (m *Manager) Prime(ctx context.Context) error {
	seen := make(map[string]bool)
	err := m.store.List(ctx, Prefix, func(e objstore.Entry) error {
		seen[e.Key] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	m.exists.Range(func(k, _ any) bool {
		if !seen[k.(string)] {
			m.exists.Delete(k)
		}
		return true
	})
	for k := range seen {
		m.exists.Store(k, struct{}{})
	}
	return nil
}

func (m *Manager) checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > m.cfg.MaxTTL {
		return fmt.Errorf("%w: %v is outside (0, %v]", ErrBadTTL, ttl, m.cfg.MaxTTL)
	}
	return nil
}

func (m *Manager) mint(subject, decisionID string, now time.Time, ttl time.Duration) Record {
	return Record{
		SchemaVersion: SchemaVersion,
		SubjectID:     subject,
		DecisionID:    decisionID,
		Token:         m.cfg.NewToken(),
		Holder:        m.cfg.Holder,
		Owner:         m.cfg.Owner,
		AcquiredAt:    now.UTC(),
		ExpiresAt:     now.Add(ttl).UTC(),
	}
}

func (m *Manager) grant(rec Record, key, etag string) *Grant {
	m.exists.Store(key, struct{}{})
	return &Grant{Record: rec, key: key, etag: etag}
}

// TryTake takes subject for ttl if it is free, without waiting. It answers a
// *Grant, or an error wrapping ErrHeld (a *HeldError) when another grant holds
// the subject; any other error is the store's, and the caller must not act.
//
// Requests: one create when the subject is free; a read when it is held; a
// read and a compare-and-swap when its holder's term has passed (plus a
// failed create first when the manager has not seen the key; see Prime).
func (m *Manager) TryTake(ctx context.Context, subject string, ttl time.Duration, decisionID string) (*Grant, error) {
	if err := m.checkTTL(ttl); err != nil {
		return nil, err
	}
	key := Key(subject)
	_, readFirst := m.exists.Load(key)
	// Each pass either decides or sees the key vanish (released between a
	// failed create and the read); a handful of passes is plenty.
	for pass := 0; pass < 8; pass++ {
		mine := ""
		if !readFirst {
			g, token, exists, err := m.tryCreate(ctx, subject, key, ttl, decisionID)
			if !exists {
				return g, err
			}
			mine = token
		}
		readFirst = false
		g, done, err := m.tryTakeOver(ctx, subject, key, ttl, decisionID, mine)
		if done {
			return g, err
		}
	}
	// Every create failed because the key held a lease, and every read found
	// it gone: other takers are taking and releasing it as fast as we look.
	// It was held each time we tried, so answer held.
	return nil, &HeldError{Subject: subject}
}

// tryCreate attempts create-if-absent. exists=true means the key holds an
// object, perhaps ours if the SDK retried a create whose first attempt
// committed: the caller reads it, knowing our token.
func (m *Manager) tryCreate(ctx context.Context, subject, key string, ttl time.Duration, decisionID string) (g *Grant, token string, exists bool, err error) {
	now, err := m.store.Now(ctx)
	if err != nil {
		return nil, "", false, fmt.Errorf("lease on %s: read the store clock: %w", subject, err)
	}
	rec := m.mint(subject, decisionID, now.Earliest, ttl)
	etag, err := m.store.Create(ctx, key, rec.marshal())
	switch {
	case err == nil:
		return m.grant(rec, key, etag), "", false, nil
	case errors.Is(err, objstore.ErrPrecondition):
		m.exists.Store(key, struct{}{})
		return nil, rec.Token, true, nil
	case errors.Is(err, objstore.ErrUnavailable):
		g, err := m.resolveAmbiguous(ctx, subject, key, rec, err)
		return g, "", false, err
	default:
		return nil, "", false, fmt.Errorf("lease on %s: %w", subject, err)
	}
}

// resolveAmbiguous reads back after a write whose outcome is unknown: the
// stored token is ours → we hold it. Otherwise the caller must not act; if
// the write lands later, the lease simply ends at its instant.
func (m *Manager) resolveAmbiguous(ctx context.Context, subject, key string, rec Record, writeErr error) (*Grant, error) {
	obj, err := m.store.Get(ctx, key)
	if err == nil {
		if got, perr := ParseRecord(obj.Body); perr == nil && got.Token == rec.Token {
			return m.grant(got, key, obj.ETag), nil
		}
	}
	return nil, fmt.Errorf("lease on %s: the store did not confirm the write and reading it back did not show it (%v); not acting: %w", subject, err, writeErr)
}

// tryTakeOver reads the key and decides: ours (the stored token is mine, from
// a write whose answer was lost), held, or expired and taken over by
// compare-and-swap against the exact version read. done=false means the key
// vanished and a create should be tried.
func (m *Manager) tryTakeOver(ctx context.Context, subject, key string, ttl time.Duration, decisionID, mine string) (*Grant, bool, error) {
	for round := 0; round < 8; round++ {
		obj, err := m.store.Get(ctx, key)
		if errors.Is(err, objstore.ErrNotFound) {
			m.exists.Delete(key)
			return nil, false, nil
		}
		if err != nil {
			return nil, true, fmt.Errorf("lease on %s: %w", subject, err)
		}
		rec, perr := m.parse(obj.Body)
		if perr == nil && mine != "" && rec.Token == mine {
			return m.grant(rec, key, obj.ETag), true, nil
		}
		now, err := m.store.Now(ctx)
		if err != nil {
			return nil, true, fmt.Errorf("lease on %s: read the store clock: %w", subject, err)
		}
		// The instant after which the stored object may be taken over.
		until := rec.ExpiresAt
		if perr != nil {
			until = obj.ModTime.Add(m.cfg.MaxTTL + modTimeResolution)
		}
		if !now.Earliest.After(until) {
			return nil, true, &HeldError{Subject: subject, Holder: rec.Holder, Owner: rec.Owner, ExpiresAt: until, Unreadable: perr != nil}
		}
		next := m.mint(subject, decisionID, now.Earliest, ttl)
		etag, err := m.store.PutIfMatch(ctx, key, next.marshal(), obj.ETag)
		switch {
		case err == nil:
			return m.grant(next, key, etag), true, nil
		case errors.Is(err, objstore.ErrPrecondition):
			// Another taker won the takeover, or the SDK retried ours after
			// it committed: the next read tells, by the token.
			mine = next.Token
		case errors.Is(err, objstore.ErrUnavailable):
			g, err := m.resolveAmbiguous(ctx, subject, key, next, err)
			return g, true, err
		default:
			return nil, true, fmt.Errorf("lease on %s: %w", subject, err)
		}
	}
	return nil, true, fmt.Errorf("lease on %s: the lease kept changing hands while it was being taken over; try again", subject)
}

// parse reads a stored lease, treating one that claims a longer term than
// anyone may ask for as unreadable: it must not block a subject for longer
// than the unreadable rule would.
func (m *Manager) parse(b []byte) (Record, error) {
	rec, err := ParseRecord(b)
	if err != nil {
		return Record{}, err
	}
	if rec.ExpiresAt.Sub(rec.AcquiredAt) > m.cfg.MaxTTL {
		return Record{}, fmt.Errorf("%w: term %v exceeds the longest allowed %v", ErrUnreadable, rec.ExpiresAt.Sub(rec.AcquiredAt), m.cfg.MaxTTL)
	}
	return rec, nil
}

// Take takes subject for ttl, waiting while it is held, but never longer than
// the arrival term: the remaining term of the grant that held it when this
// call arrived. If the subject has not become free by then, Take answers
// ErrUnavailable. A later holder never extends the bound.
func (m *Manager) Take(ctx context.Context, subject string, ttl time.Duration, decisionID string) (*Grant, error) {
	g, err := m.TryTake(ctx, subject, ttl, decisionID)
	var held *HeldError
	// A key changing hands too fast to read has no arrival term yet: look
	// again until a holder and its instant are seen.
	for errors.As(err, &held) && held.ExpiresAt.IsZero() {
		if err := m.cfg.Clock.Sleep(ctx, m.cfg.PollInterval); err != nil {
			return nil, fmt.Errorf("lease on %s: waiting for the key to settle: %w", subject, err)
		}
		g, err = m.TryTake(ctx, subject, ttl, decisionID)
	}
	if !errors.As(err, &held) {
		return g, err
	}
	arrival := *held
	for {
		now, err := m.store.Now(ctx)
		if err != nil {
			return nil, fmt.Errorf("lease on %s: read the store clock: %w", subject, err)
		}
		if wait := arrival.ExpiresAt.Sub(now.Earliest) + time.Nanosecond; wait > 0 {
			if wait > m.cfg.PollInterval {
				wait = m.cfg.PollInterval
			}
			if err := m.cfg.Clock.Sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("lease on %s: waiting for the holder's instant: %w", subject, err)
			}
		}
		before, err := m.store.Now(ctx)
		if err != nil {
			return nil, fmt.Errorf("lease on %s: read the store clock: %w", subject, err)
		}
		g, err = m.TryTake(ctx, subject, ttl, decisionID)
		if !errors.As(err, &held) {
			return g, err
		}
		if before.Earliest.After(arrival.ExpiresAt) {
			// This attempt began after the arrival term had certainly
			// passed, and someone else holds the key: the bound is spent.
			return nil, fmt.Errorf("lease on %s: %w: it was held by %s (owner %s) until %s when this take arrived, and is now held by owner %s until %s",
				subject, ErrUnavailable, arrival.Holder, arrival.Owner, arrival.ExpiresAt.UTC().Format(time.RFC3339Nano),
				held.Owner, held.ExpiresAt.UTC().Format(time.RFC3339Nano))
		}
	}
}

// Remaining asks the store how much of g's term is left. ok is false (none)
// when the stored lease is not g's, or g's term has passed. It is a store
// query, never g.ExpiresAt minus a local reading.
func (m *Manager) Remaining(ctx context.Context, g *Grant) (left time.Duration, ok bool, err error) {
	obj, err := m.store.Get(ctx, g.key)
	if errors.Is(err, objstore.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("lease on %s: %w", g.SubjectID, err)
	}
	rec, err := ParseRecord(obj.Body)
	if err != nil || rec.Token != g.Token {
		return 0, false, nil
	}
	now, err := m.store.Now(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("lease on %s: read the store clock: %w", g.SubjectID, err)
	}
	left = rec.ExpiresAt.Sub(now.Latest)
	if left <= 0 {
		return 0, false, nil
	}
	return left, true, nil
}

// Release ends g: a delete-if-match on the version g wrote, so that nothing
// can slip in between a read and the delete, and another grant's lease is
// never reached. See ReleaseResult for the answers; only a store failure is
// an error.
//
// Requests: none when g's term has passed; one delete otherwise; a read more
// when the delete is refused.
func (m *Manager) Release(ctx context.Context, g *Grant) (ReleaseResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return NotHeld, nil
	}
	now, err := m.store.Now(ctx)
	if err != nil {
		return 0, fmt.Errorf("release lease on %s: read the store clock: %w", g.SubjectID, err)
	}
	if !now.Latest.Add(m.cfg.ReleaseMargin).Before(g.ExpiresAt) {
		// Passed, or about to: a delete now could meet a takeover of this
		// very version. The grant ends at its instant either way.
		return NotHeld, nil
	}
	etag := g.etag
	for attempt := 0; attempt < 3; attempt++ {
		err = m.store.DeleteIfMatch(ctx, g.key, etag)
		if err == nil {
			g.released = true
			m.exists.Delete(g.key)
			return Released, nil
		}
		ambiguous := errors.Is(err, objstore.ErrUnavailable)
		if !ambiguous && !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrNotFound) {
			return 0, fmt.Errorf("release lease on %s: %w", g.SubjectID, err)
		}
		obj, gerr := m.store.Get(ctx, g.key)
		switch {
		case errors.Is(gerr, objstore.ErrNotFound):
			if ambiguous {
				// Our delete most likely landed before its answer was lost.
				g.released = true
				m.exists.Delete(g.key)
				return Released, nil
			}
			m.exists.Delete(g.key)
			return m.lost(ctx, g)
		case gerr != nil:
			return 0, fmt.Errorf("release lease on %s: the delete failed (%v) and reading the lease back failed: %w", g.SubjectID, err, gerr)
		}
		rec, perr := ParseRecord(obj.Body)
		if perr == nil && rec.Token == g.Token {
			etag = obj.ETag // still ours, at another version: delete that one
			continue
		}
		if perr == nil && rec.AcquiredAt.After(g.ExpiresAt) {
			// Taken over after our instant: our term passed, as it may.
			return NotHeld, nil
		}
		return OwnershipChanged, nil
	}
	return 0, fmt.Errorf("release lease on %s: the lease kept changing under the release; try again", g.SubjectID)
}

// lost decides a release whose lease object is gone: if g's term may have
// passed, someone took over and released since (not-held); otherwise it was
// removed while g held it (ownership-changed).
func (m *Manager) lost(ctx context.Context, g *Grant) (ReleaseResult, error) {
	now, err := m.store.Now(ctx)
	if err != nil {
		return 0, fmt.Errorf("release lease on %s: read the store clock: %w", g.SubjectID, err)
	}
	if now.Latest.After(g.ExpiresAt) {
		return NotHeld, nil
	}
	return OwnershipChanged, nil
}

// Renew extends g to ttl from now (store clock) with a compare-and-swap on
// the version g wrote, keeping its token. A grant whose term has passed, or
// whose lease changed, cannot be renewed: ErrNotHeld; take the subject again.
func (m *Manager) Renew(ctx context.Context, g *Grant, ttl time.Duration) error {
	if err := m.checkTTL(ttl); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return fmt.Errorf("renew lease on %s: %w: it was released", g.SubjectID, ErrNotHeld)
	}
	now, err := m.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("renew lease on %s: read the store clock: %w", g.SubjectID, err)
	}
	if !now.Latest.Before(g.ExpiresAt) {
		return fmt.Errorf("renew lease on %s: %w: its term may have passed at %s", g.SubjectID, ErrNotHeld, g.ExpiresAt.Format(time.RFC3339Nano))
	}
	next := g.Record
	next.ExpiresAt = now.Earliest.Add(ttl).UTC()
	if next.ExpiresAt.Before(g.ExpiresAt) {
		next.ExpiresAt = g.ExpiresAt // renew never shortens
	}
	if next.ExpiresAt.Sub(next.AcquiredAt) > m.cfg.MaxTTL {
		return fmt.Errorf("renew lease on %s: %w: the whole grant would exceed %v", g.SubjectID, ErrBadTTL, m.cfg.MaxTTL)
	}
	etag, err := m.store.PutIfMatch(ctx, g.key, next.marshal(), g.etag)
	if err != nil {
		if !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrUnavailable) {
			return fmt.Errorf("renew lease on %s: %w", g.SubjectID, err)
		}
		// Ambiguous, or an SDK retry of a renew that committed: read back.
		obj, gerr := m.store.Get(ctx, g.key)
		if gerr != nil {
			return fmt.Errorf("renew lease on %s: %w (reading it back: %v)", g.SubjectID, err, gerr)
		}
		rec, perr := ParseRecord(obj.Body)
		if perr != nil || rec.Token != g.Token || !rec.ExpiresAt.Equal(next.ExpiresAt) {
			return fmt.Errorf("renew lease on %s: %w: the stored lease is no longer this grant's", g.SubjectID, ErrNotHeld)
		}
		etag = obj.ETag
	}
	g.Record = next
	g.etag = etag
	return nil
}

// Fence mints g's fence for a party allowed the given clock allowance:
// Instant = ExpiresAt − allowance on the store's clock, and Deadline, the
// local monotonic moment by which the store's clock cannot yet have reached
// Instant (judged on the latest the store's time can be). Mint one fence per
// fenced party; never derive one fence from another.
func (m *Manager) Fence(ctx context.Context, g *Grant, allowance time.Duration) (Fence, error) {
	if allowance < 0 {
		return Fence{}, fmt.Errorf("fence for %s: negative allowance %v", g.SubjectID, allowance)
	}
	g.mu.Lock()
	expires := g.ExpiresAt
	g.mu.Unlock()
	// Local first, store second: the store reading is then the later one,
	// so any time between the two readings makes the deadline earlier.
	local := m.cfg.Clock.Now()
	now, err := m.store.Now(ctx)
	if err != nil {
		return Fence{}, fmt.Errorf("fence for %s: read the store clock: %w", g.SubjectID, err)
	}
	instant := expires.Add(-allowance)
	return Fence{Instant: instant, Deadline: local.Add(instant.Sub(now.Latest))}, nil
}

// IsHeld reports whether err says the subject is held by another grant.
func IsHeld(err error) bool { return errors.Is(err, ErrHeld) }
