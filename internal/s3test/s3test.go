// Package s3test runs a real S3 server for tests: Versity Gateway with its
// posix backend in a temporary directory, on a free port of 127.0.0.1.
//
// A missing server binary is a test failure, never a skip: the s3 backend is
// only proven against a real server. Install it with `make tools`.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the Versity Gateway release the tests run against.
const Version = "v1.8.0"

// InstallHint says how to get the server.
const InstallHint = "go install github.com/versity/versitygw/cmd/versitygw@" + Version + " (or `make tools`)"

// Server is a running Versity Gateway.
type Server struct {
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string
	Dir       string

	cmd     *exec.Cmd
	log     *bytes.Buffer
	buckets atomic.Int64
	done    chan struct{}
}

// Binary finds the versitygw binary: $STADO_VERSITYGW, then PATH, then
// $GOBIN, then $GOPATH/bin (default ~/go/bin).
func Binary() (string, error) {
	if p := os.Getenv("STADO_VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if gp := os.Getenv("GOPATH"); gp != "" {
		for _, d := range filepath.SplitList(gp) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("versitygw not found on PATH, in $GOBIN or in $GOPATH/bin: install it with %s", InstallHint)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// StartServer starts a gateway whose objects live under dir. Stop it with
// Stop.
func StartServer(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{
			Endpoint:  fmt.Sprintf("http://127.0.0.1:%d", port),
			Region:    "us-east-1",
			AccessKey: "stado" + randomHex(6),
			SecretKey: randomHex(20),
			Dir:       data,
			log:       &bytes.Buffer{},
			done:      make(chan struct{}),
		}
		s.cmd = exec.Command(bin, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", data)
		s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
		s.cmd.Stdout = s.log
		s.cmd.Stderr = s.log
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		go func() { _ = s.cmd.Wait(); close(s.done) }()
		if err := s.waitReady(15 * time.Second); err != nil {
			s.Stop()
			lastErr = fmt.Errorf("versitygw on port %d: %w; its output:\n%s", port, err, s.log.String())
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := s.Client()
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("exited during start-up")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("did not answer within " + limit.String())
}

// Stop kills the gateway and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Credentials returns static credentials for the server's root account.
func (s *Server) Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")
}

// Client returns a plain SDK client for the server, for test set-up.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  s.Credentials(),
	})
}

// CreateBucket creates a new, uniquely named bucket and returns its name.
func (s *Server) CreateBucket() (string, error) {
	name := fmt.Sprintf("stado-test-%d-%s", s.buckets.Add(1), randomHex(3))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return "", fmt.Errorf("create bucket %s: %w", name, err)
	}
	return name, nil
}

// URL returns the stado store URL of bucket/prefix on this server.
func (s *Server) URL(bucket, prefix string) string {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + strings.Trim(prefix, "/")
	}
	return u + "?region=" + s.Region + "&endpoint=" + s.Endpoint + "&path_style=true"
}

// Env returns the environment a child process needs to reach the server
// through the standard credential chain.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Start starts a gateway for one test and stops it when the test ends. A
// missing binary fails the test.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartServer(tb.TempDir())
	if err != nil {
		tb.Fatalf("S3 test server: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Bucket creates a fresh bucket on s for one test.
func (s *Server) Bucket(tb testing.TB) string {
	tb.Helper()
	b, err := s.CreateBucket()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// RunTests starts one server for a whole test binary, stores it in *srv,
// runs the tests and stops it. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(s3test.RunTests(m, &srv)) }
func RunTests(m *testing.M, srv **Server) int {
	dir, err := os.MkdirTemp("", "stado-s3test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := StartServer(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "S3 test server: %v\n", err)
		return 1
	}
	defer s.Stop()
	*srv = s
	return m.Run()
}
