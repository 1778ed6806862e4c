package leasebench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stado/stado/bench/internal/etcdgrpc"
	"github.com/stado/stado/bench/internal/resp"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/s3test"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

// Locker is one client of a lock service: each contender has its own, as
// separate processes would.
type Locker interface {
	// TryAcquire takes the subject if it is free; ok is false when it is
	// held by another.
	TryAcquire(ctx context.Context) (ok bool, err error)
	// Release releases what TryAcquire took, gated by its token.
	Release(ctx context.Context) error
	Close()
}

// System is one lock service under test.
type System struct {
	Name string
	// Durability says when an acknowledged take has reached stable storage.
	Durability string
	// Requests is what one take+release costs, in round trips.
	Requests  string
	NewLocker func(i int) (Locker, error)
	Stop      func()
}

const (
	subject = "service:h00001:u1.service"
	ttl     = time.Minute
)

// stado's lease over a store.

type stadoLocker struct {
	m *lease.Manager
	g *lease.Grant
}

func (l *stadoLocker) TryAcquire(ctx context.Context) (bool, error) {
	g, err := l.m.TryTake(ctx, subject, ttl, "bench")
	if lease.IsHeld(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.g = g
	return true, nil
}

func (l *stadoLocker) Release(ctx context.Context) error {
	res, err := l.m.Release(ctx, l.g)
	if err != nil {
		return err
	}
	if res != lease.Released {
		return fmt.Errorf("release answered %s", res)
	}
	return nil
}

func (l *stadoLocker) Close() {}

func newStadoLocker(store objstore.Store, i int) (Locker, error) {
	m, err := lease.NewManager(store, lease.Config{Holder: "service-reconciler", Owner: fmt.Sprintf("bench/%d", i)})
	if err != nil {
		return nil, err
	}
	// The first reading of the store clock may cost a request; not part of
	// any take.
	if _, err := store.Now(context.Background()); err != nil {
		return nil, err
	}
	return &stadoLocker{m: m}, nil
}

// FS is stado's lease on the fs store in dir: every contender opens the
// store itself, as a separate process would.
func FS(dir string) (*System, error) {
	return &System{
		Name:       "stado lease, fs store",
		Durability: "fsync of the file and of its directory before a write is acknowledged",
		Requests:   "take: create-if-absent; release: delete-if-match",
		NewLocker: func(i int) (Locker, error) {
			s, err := objstore.NewFS(dir, clock.Real{})
			if err != nil {
				return nil, err
			}
			return newStadoLocker(s, i)
		},
		Stop: func() {},
	}, nil
}

// S3 is stado's lease on a Versity Gateway started in dir, without added
// latency.
func S3(dir string) (*System, error) {
	srv, err := s3test.StartServer(dir)
	if err != nil {
		return nil, err
	}
	bucket, err := srv.CreateBucket()
	if err != nil {
		srv.Stop()
		return nil, err
	}
	url := srv.URL(bucket, "fleet")
	return &System{
		Name:       "stado lease, S3 store (Versity Gateway " + s3test.Version + ", posix backend)",
		Durability: "none: the gateway's posix backend writes through the page cache and never fsyncs",
		Requests:   "take: PUT If-None-Match; release: DELETE If-Match",
		NewLocker: func(i int) (Locker, error) {
			s, err := objstore.Open(context.Background(), url, objstore.OpenOptions{S3: objstore.S3Options{Credentials: srv.Credentials()}})
			if err != nil {
				return nil, err
			}
			return newStadoLocker(s, i)
		},
		Stop: srv.Stop,
	}, nil
}

// etcd.

type etcdLocker struct {
	c     *etcdgrpc.Client
	token []byte
	lease int64
}

var etcdKey = []byte("/locks/" + subject)

func (l *etcdLocker) TryAcquire(ctx context.Context) (bool, error) {
	if l.lease == 0 {
		id, err := l.c.LeaseGrant(ctx, int64(ttl/time.Second))
		if err != nil {
			return false, err
		}
		l.lease = id
		l.token = []byte(newToken())
	}
	ok, err := l.c.PutIfAbsent(ctx, etcdKey, l.token, l.lease)
	if err != nil {
		return false, err
	}
	// When held, the granted lease is kept for the next attempt, as
	// etcd's own lock keeps its session's lease.
	return ok, nil
}

func (l *etcdLocker) Release(ctx context.Context) error {
	ok, err := l.c.DeleteIfValue(ctx, etcdKey, l.token)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("etcd: the lock was not ours at release")
	}
	err = l.c.LeaseRevoke(ctx, l.lease)
	l.lease = 0
	return err
}

func (l *etcdLocker) Close() { l.c.Close() }

// Etcd starts a single-member etcd (Debian's etcd-server) in dir on loopback.
func Etcd(dir string) (*System, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd not found: install Debian's etcd-server: %w", err)
	}
	client, peer := freePort(), freePort()
	cu, pu := "http://127.0.0.1:"+strconv.Itoa(client), "http://127.0.0.1:"+strconv.Itoa(peer)
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu, "--initial-cluster", "bench="+pu,
		"--logger", "zap", "--log-level", "error")
	stop, err := startServer(cmd, filepath.Join(dir, "etcd.log"), func() error {
		c := etcdgrpc.New(cu)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		id, err := c.LeaseGrant(ctx, 10)
		if err == nil {
			err = c.LeaseRevoke(ctx, id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	version := serverVersion(bin, "--version")
	return &System{
		Name:       "etcd " + version + " (gRPC)",
		Durability: "fdatasync of the write-ahead log before a write is acknowledged (etcd's default)",
		Requests:   "take: LeaseGrant + Txn(create_revision = 0 → put with lease); release: Txn(value = token → delete) + LeaseRevoke",
		NewLocker: func(int) (Locker, error) {
			return &etcdLocker{c: etcdgrpc.New(cu)}, nil
		},
		Stop: stop,
	}, nil
}

// Redis.

type redisLocker struct {
	c     *resp.Conn
	token string
}

const redisKey = "lock:" + subject

// redisUnlock is the compare-and-delete script of the Redis documentation's
// lock pattern.
const redisUnlock = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

func (l *redisLocker) TryAcquire(context.Context) (bool, error) {
	l.token = newToken()
	v, err := l.c.Do("SET", redisKey, l.token, "NX", "PX", strconv.FormatInt(ttl.Milliseconds(), 10))
	if errors.Is(err, resp.ErrNil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return v == "OK", nil
}

func (l *redisLocker) Release(context.Context) error {
	v, err := l.c.Do("EVAL", redisUnlock, "1", redisKey, l.token)
	if err != nil {
		return err
	}
	if v != int64(1) {
		return fmt.Errorf("redis: the lock was not ours at release (%v)", v)
	}
	return nil
}

func (l *redisLocker) Close() { l.c.Close() }

// Redis starts Debian's redis-server in dir on loopback. With fsync, it
// appends every write to its AOF and fsyncs it before answering
// (appendonly yes, appendfsync always); without, it runs with its defaults
// (appendonly no: nothing is fsynced per write).
func Redis(dir string, fsync bool) (*System, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: install Debian's redis-server: %w", err)
	}
	port := freePort()
	name, durability := "defaults", "none per write: appendonly no (Redis's default); the dataset reaches disk only in periodic RDB snapshots"
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no", "--logfile", ""}
	if fsync {
		name, durability = "appendonly yes, appendfsync always", "fsync of the append-only file before a write is acknowledged (appendonly yes, appendfsync always)"
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	stop, err := startServer(exec.Command(bin, args...), filepath.Join(dir, "redis.log"), func() error {
		c, err := resp.Dial(addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Do("PING")
		return err
	})
	if err != nil {
		return nil, err
	}
	version := serverVersion(bin, "--version")
	return &System{
		Name:       "Redis " + version + " (" + name + ")",
		Durability: durability,
		Requests:   "take: SET NX PX; release: EVAL compare-and-delete",
		NewLocker: func(int) (Locker, error) {
			c, err := resp.Dial(addr, 5*time.Second)
			if err != nil {
				return nil, err
			}
			return &redisLocker{c: c}, nil
		},
		Stop: stop,
	}, nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts cmd with its output in logPath and waits until ready
// answers; stop kills it.
func startServer(cmd *exec.Cmd, logPath string, ready func() error) (stop func(), err error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := ready()
		if err == nil {
			return stop, nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited during start-up: %s", cmd.Path, out)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s did not answer within 20s: %v", cmd.Path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func serverVersion(bin, flag string) string {
	out, err := exec.Command(bin, flag).Output()
	if err != nil {
		return "?"
	}
	s := string(out)
	// "etcd Version: 3.4.23" / "Redis server v=7.0.15 sha=…"
	if i := strings.Index(s, "Version: "); i >= 0 {
		return strings.Fields(s[i+len("Version: "):])[0]
	}
	if i := strings.Index(s, "v="); i >= 0 {
		return strings.Fields(s[i+2:])[0]
	}
	return strings.TrimSpace(s)
}
