package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stado/stado/autonomy"
	"github.com/stado/stado/internal/clitest"
	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/policy"
)

// ctlStore is one store the built binary is run against: the flags and
// environment that name it, and a client of it for the test to check and
// plant state with.
type ctlStore struct {
	name  string
	url   string
	env   []string
	store objstore.Store
}

// forEachCtlStore runs fn against a fresh fs store (a directory) and a fresh
// S3 store (a bucket on the shared test server).
func forEachCtlStore(t *testing.T, fn func(t *testing.T, s ctlStore)) {
	t.Run("fs", func(t *testing.T) {
		dir := t.TempDir()
		st, err := objstore.NewFS(dir, clock.Real{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, ctlStore{name: "fs", url: dir, store: st})
	})
	t.Run("s3", func(t *testing.T) {
		url := s3srv.URL(s3srv.Bucket(t), "fleet/prod")
		st, err := objstore.Open(context.Background(), url, objstore.OpenOptions{
			S3: objstore.S3Options{Credentials: s3srv.Credentials()},
		})
		if err != nil {
			t.Fatal(err)
		}
		fn(t, ctlStore{name: "s3", url: url, env: s3srv.Env(), store: st})
	})
}

// run runs `stado --store URL args...` in dir ("" for the test's own).
func (s ctlStore) run(t *testing.T, dir string, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, clitest.Cmd{Args: append([]string{"--store", s.url}, args...), Env: s.env, Dir: dir})
}

// command builds, without starting it, `stado --store URL args...` in dir,
// for tests that start several at once.
func (s ctlStore) command(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(clitest.Binary(t), append([]string{"--store", s.url}, args...)...)
	cmd.Env = append(clitest.BaseEnv(t), s.env...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// get reads key from the store, or fails the test.
func (s ctlStore) get(t *testing.T, key string) objstore.Object {
	t.Helper()
	obj, err := s.store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return obj
}

// put plants body at key, unconditionally.
func (s ctlStore) put(t *testing.T, key, body string) {
	t.Helper()
	if _, err := s.store.Put(context.Background(), key, []byte(body)); err != nil {
		t.Fatalf("write %s: %v", key, err)
	}
}

// control loads the stored control state.
func (s ctlStore) control(t *testing.T) *autonomy.Stored {
	t.Helper()
	st, err := autonomy.Load(context.Background(), s.store)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// policyVersion is the stored policy's version, or "" when none is stored.
func (s ctlStore) policyVersion(t *testing.T) string {
	t.Helper()
	obj, err := s.store.Get(context.Background(), policy.Key)
	if errors.Is(err, objstore.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.ETag
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// expectResult fails the test unless r exited with code, printing all of r.
func expectResult(t *testing.T, what string, r clitest.Result, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.Code, code, r.Stdout, r.Stderr)
	}
}

// mustContain fails the test unless s contains every one of wants.
func mustContain(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

// rawControl reports the first raw terminal control character in s: C0
// (but newline and tab), DEL, C1, or a bidirectional override.
func rawControl(s string) (rune, bool) {
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || r == 0xfffd {
			return r, true
		}
	}
	return 0, false
}
