package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/stado/stado/internal/clock"
)

// lockStripes is how many independent write locks the fs backend has. Two
// keys that hash to one stripe merely serialise; correctness never depends on
// the hash.
const lockStripes = 1024

// lockFileName is the one file the fs backend keeps beside the objects: the
// byte-range lock that serialises conditional writes across processes. It is
// empty, holds no metadata, and starts with a dot, so it is never a key.
const lockFileName = ".stado.lock"

// FS is the embedded default Store: a directory on local disk. Key K is the
// file <root>/K and nothing else is stored per object, so operators can read,
// back up and restore the state with ordinary tools.
//
// Every write is atomic and durable: the new content is written to a
// temporary file in the target's directory; then, holding the key's lock,
// the condition is checked, the file fsynced and renamed into place, and the
// directory fsynced. The lock is an open-file-description (OFD) byte-range
// lock on <root>/.stado.lock plus an in-process mutex per stripe, so FS is
// safe for many goroutines and many processes on one host. It is not safe on
// NFS, whose locking and rename semantics differ.
//
// Reads take no lock: rename replaces a file atomically, so a reader sees
// either the old or the new content, never a mix.
type FS struct {
	root  string
	clock clock.Clock

	stripes  [lockStripes]sync.Mutex
	lockOnce sync.Once
	lockFile *os.File
	lockErr  error
}

// NewFS returns the fs store rooted at dir. The directory is created on the
// first write. Its clock is c (the host clock in production).
func NewFS(dir string, c clock.Clock) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store directory %q: %w", dir, err)
	}
	return &FS{root: abs, clock: c}, nil
}

// Root returns the store's directory.
func (s *FS) Root() string { return s.root }

// Location implements Store.
func (s *FS) Location() string { return "file://" + s.root }

// Close releases the lock file.
func (s *FS) Close() error {
	if s.lockFile != nil {
		return s.lockFile.Close()
	}
	return nil
}

func (s *FS) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

// fsError classifies an OS error. A missing file is ErrNotFound; a
// permission problem is ErrDenied; anything else (a full disk, an I/O error)
// is ErrUnavailable.
func fsError(op, key string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return opError(op, key, ErrNotFound, nil)
	case errors.Is(err, fs.ErrPermission):
		return opError(op, key, ErrDenied, err)
	default:
		return opError(op, key, ErrUnavailable, err)
	}
}

// Get implements Store.
func (s *FS) Get(ctx context.Context, key string) (Object, error) {
	if err := ValidKey(key); err != nil {
		return Object{}, opError("get", key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return Object{}, opError("get", key, ErrUnavailable, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return Object{}, fsError("get", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Object{}, fsError("get", key, err)
	}
	if !st.Mode().IsRegular() {
		return Object{}, opError("get", key, ErrNotFound, nil)
	}
	body, err := readAll(f, st.Size())
	if err != nil {
		return Object{}, fsError("get", key, err)
	}
	return Object{Key: key, Body: body, ETag: contentETag(body), ModTime: st.ModTime()}, nil
}

// readAll reads f to its end into one buffer sized from the file's size, as
// os.ReadFile does: a registry of 100,000 services is tens of megabytes, and
// io.ReadAll would grow its buffer by doubling, copying it a dozen times. The
// size is only a hint (an operator may edit a file in place); the read goes
// on to EOF whatever it is.
func readAll(f *os.File, size int64) ([]byte, error) {
	if size < 0 || size > 1<<40 {
		size = 0
	}
	b := make([]byte, 0, size+512)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// Create implements Store.
func (s *FS) Create(ctx context.Context, key string, body []byte) (string, error) {
	return s.replace(ctx, "create", key, body, func(cur []byte, exists bool) error {
		if exists {
			return ErrPrecondition
		}
		return nil
	})
}

// PutIfMatch implements Store.
func (s *FS) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	return s.replace(ctx, "put-if-match", key, body, func(cur []byte, exists bool) error {
		if !exists || contentETag(cur) != etag {
			return ErrPrecondition
		}
		return nil
	})
}

// Put implements Store.
func (s *FS) Put(ctx context.Context, key string, body []byte) (string, error) {
	return s.replace(ctx, "put", key, body, nil)
}

// replace writes body to a temporary file, then under the key's lock checks
// the condition against the current content and renames the file into place.
// check is nil for an unconditional write.
func (s *FS) replace(ctx context.Context, op, key string, body []byte, check func(cur []byte, exists bool) error) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", opError(op, key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return "", opError(op, key, ErrUnavailable, err)
	}
	target := s.path(key)
	// Fail fast when the condition already fails, before paying for a
	// temporary file and an fsync: a condition seen failing at any moment
	// of the call is a valid answer (it linearizes at that read). The check
	// that decides a success is repeated under the lock below.
	if check != nil {
		cur, err := os.ReadFile(target)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", fsError(op, key, err)
		}
		if cerr := check(cur, err == nil); cerr != nil {
			return "", opError(op, key, cerr, nil)
		}
	}
	dir := filepath.Dir(target)
	if err := s.mkdirAll(dir); err != nil {
		return "", fsError(op, key, err)
	}
	tmp, err := writeTemp(dir, filepath.Base(target), body)
	if err != nil {
		return "", fsError(op, key, err)
	}
	renamed := false
	defer func() {
		_ = tmp.Close()
		if !renamed {
			_ = os.Remove(tmp.Name())
		}
	}()

	unlock, err := s.lock(key)
	if err != nil {
		return "", fsError(op, key, err)
	}
	defer unlock()
	if check != nil {
		cur, err := os.ReadFile(target)
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fsError(op, key, err)
		}
		if cerr := check(cur, exists); cerr != nil {
			return "", opError(op, key, cerr, nil)
		}
	}
	// Only a write that is going to land pays for the fsync: under
	// contention most conditional writes lose, and losing must be cheap.
	if err := tmp.Sync(); err != nil {
		return "", fsError(op, key, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return "", fsError(op, key, err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return "", fsError(op, key, err)
	}
	return contentETag(body), nil
}

// DeleteIfMatch implements Store.
func (s *FS) DeleteIfMatch(ctx context.Context, key, etag string) error {
	return s.remove(ctx, "delete-if-match", key, func(cur []byte) error {
		if contentETag(cur) != etag {
			return ErrPrecondition
		}
		return nil
	})
}

// Delete implements Store.
func (s *FS) Delete(ctx context.Context, key string) error {
	return s.remove(ctx, "delete", key, nil)
}

func (s *FS) remove(ctx context.Context, op, key string, check func(cur []byte) error) error {
	if err := ValidKey(key); err != nil {
		return opError(op, key, err, nil)
	}
	if err := ctx.Err(); err != nil {
		return opError(op, key, ErrUnavailable, err)
	}
	target := s.path(key)
	unlock, err := s.lock(key)
	if err != nil {
		return fsError(op, key, err)
	}
	defer unlock()
	if check != nil {
		cur, err := os.ReadFile(target)
		if err != nil {
			return fsError(op, key, err)
		}
		if cerr := check(cur); cerr != nil {
			return opError(op, key, cerr, nil)
		}
	}
	if err := os.Remove(target); err != nil {
		if errors.Is(err, fs.ErrNotExist) && check == nil {
			return nil
		}
		return fsError(op, key, err)
	}
	if err := syncDir(filepath.Dir(target)); err != nil {
		return fsError(op, key, err)
	}
	return nil
}

// List implements Store. Keys are collected and sorted, because a directory
// walk's order ("a/b" before "a-c") is not byte order of the whole key.
func (s *FS) List(ctx context.Context, prefix string, fn func(Entry) error) error {
	if err := ctx.Err(); err != nil {
		return opError("list", prefix, ErrUnavailable, err)
	}
	// Walk the deepest directory the prefix names in full.
	base := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	var entries []Entry
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != base {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while listing
			}
			return err
		}
		entries = append(entries, Entry{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return fsError("list", prefix, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return opError("list", prefix, ErrUnavailable, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Now implements Store: the fs store's clock is the host's, read exactly.
func (s *FS) Now(ctx context.Context) (TimeBounds, error) {
	if err := ctx.Err(); err != nil {
		return TimeBounds{}, opError("clock", "", ErrUnavailable, err)
	}
	t := s.clock.Now()
	return TimeBounds{Earliest: t, Latest: t}, nil
}

// lock takes the key's stripe: first the in-process mutex (so goroutines of
// this process queue cheaply), then the OFD byte-range lock (so processes
// exclude each other). OFD locks belong to the open file description, not to
// the process, so they are neither shared between goroutines by accident nor
// dropped when another descriptor of the file is closed, unlike classic POSIX
// record locks.
func (s *FS) lock(key string) (func(), error) {
	f, err := s.openLockFile()
	if err != nil {
		return nil, err
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	stripe := int64(h.Sum32() % lockStripes)
	mu := &s.stripes[stripe]
	mu.Lock()
	if err := ofdLock(f, stripe); err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = ofdUnlock(f, stripe)
		mu.Unlock()
	}, nil
}

func (s *FS) openLockFile() (*os.File, error) {
	s.lockOnce.Do(func() {
		if err := s.mkdirAll(s.root); err != nil {
			s.lockErr = err
			return
		}
		s.lockFile, s.lockErr = os.OpenFile(filepath.Join(s.root, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	})
	return s.lockFile, s.lockErr
}

// mkdirAll creates dir and its missing parents, fsyncing each parent whose
// entries changed so that a crash cannot lose a directory an object was
// renamed into.
func (s *FS) mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return syncDir(parent)
}

// writeTemp writes body to a new hidden file in dir and returns it open;
// the caller fsyncs it before renaming it into place.
func writeTemp(dir, base string, body []byte) (*os.File, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, "."+base+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		os.Remove(name)
		return nil, err
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
