package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/objstore"
)

func TestFSKeysArePlainFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewFS(dir, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Create(ctx, "state/autonomy/control.json", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state", "autonomy", "control.json"))
	if err != nil || string(b) != `{"x":1}` {
		t.Fatalf("object is not the plain file: %q %v", b, err)
	}
	// Nothing but the object and the lock file: no sidecar metadata.
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if len(files) != 2 || files[0] != ".stado.lock" {
		t.Fatalf("files on disk: %v", files)
	}
}

func TestFSIgnoresLeftoverTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, _ := objstore.NewFS(dir, clock.Real{})
	ctx := context.Background()
	if _, err := s.Create(ctx, "state/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	// A crash between writing the temporary file and renaming it.
	if err := os.WriteFile(filepath.Join(dir, "state", ".b.0123.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.List(ctx, "state/", func(e objstore.Entry) error { keys = append(keys, e.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "state/a" {
		t.Fatalf("List = %v", keys)
	}
}

func TestFSUnusableRootIsUnavailable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := objstore.NewFS(file, clock.Real{})
	_, err := s.Create(context.Background(), "state/a", []byte("a"))
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Create under a file: %v, want ErrUnavailable", err)
	}
}
