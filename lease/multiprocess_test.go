package lease_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/lease"
	"github.com/stado/stado/objstore"
)

// The environment a racer child process reads.
const (
	racerEnv      = "STADO_LEASE_RACER"       // "race" or "hold"
	racerStoreEnv = "STADO_LEASE_RACER_STORE" // store URL
	racerOutEnv   = "STADO_LEASE_RACER_OUT"   // file for hold intervals
	racerRunEnv   = "STADO_LEASE_RACER_FOR"   // how long to race
)

// hold is one winner's hold interval, in store-clock time. The fs store's
// clock is this host's clock, and so is the S3 server's, which runs on this
// host: the racers read it directly, which is exact, where their Date-based
// estimate would be a two-second interval.
type hold struct {
	Subject  string    `json:"subject"`
	Token    string    `json:"token"`
	Owner    string    `json:"owner"`
	Start    time.Time `json:"start"` // when the take had returned
	End      time.Time `json:"end"`   // before the release was sent, or expires_at if abandoned
	Released bool      `json:"released"`
}

// racerMain is a child process: "race" loops try-take/release over a few
// subjects and records every hold; "hold" takes one subject, prints its
// grant, and waits to be killed.
func racerMain() int {
	ctx := context.Background()
	store, err := objstore.Open(ctx, os.Getenv(racerStoreEnv), objstore.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	owner := fmt.Sprintf("racer/%d", os.Getpid())
	m, err := lease.NewManager(store, lease.Config{Holder: "service-reconciler", Owner: owner, PollInterval: 20 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch os.Getenv(racerEnv) {
	case "hold":
		g, err := m.TryTake(ctx, "service:victim:api.service", 3*time.Second, "hold")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		b, _ := json.Marshal(g.Record)
		fmt.Println(string(b))
		select {} // until killed
	case "race":
		return race(ctx, m, owner)
	}
	return 2
}

func race(ctx context.Context, m *lease.Manager, owner string) int {
	out, err := os.Create(os.Getenv(racerOutEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer out.Close()
	enc := json.NewEncoder(out)
	d, _ := time.ParseDuration(os.Getenv(racerRunEnv))
	stop := time.Now().Add(d)
	subjects := []string{"service:h1:a.service", "service:h1:b.service", "service:h2:a.service", "service:h2:b.service"}
	for time.Now().Before(stop) {
		subject := subjects[rand.N(len(subjects))]
		// One grant in twenty is abandoned, as by a holder that dies; it
		// asks for a short term so the subject is contested again soon.
		abandon := rand.N(20) == 0
		ttl := 5 * time.Second
		if abandon {
			ttl = time.Second
		}
		var g *lease.Grant
		if rand.N(4) == 0 {
			tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			g, err = m.Take(tctx, subject, ttl, "race")
			cancel()
		} else {
			g, err = m.TryTake(ctx, subject, ttl, "race")
		}
		if err != nil {
			if errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
				continue
			}
			fmt.Fprintln(os.Stderr, "take:", err)
			return 1
		}
		h := hold{Subject: subject, Token: g.Token, Owner: owner, Start: time.Now()}
		time.Sleep(time.Duration(rand.N(40)) * time.Millisecond) // the work
		if abandon {
			h.End = g.ExpiresAt // it ends at its instant
		} else {
			before := time.Now()
			res, err := m.Release(ctx, g)
			if err != nil {
				fmt.Fprintln(os.Stderr, "release:", err)
				return 1
			}
			switch res {
			case lease.Released:
				h.End, h.Released = before, true
			case lease.NotHeld:
				h.End = g.ExpiresAt
			default:
				fmt.Fprintf(os.Stderr, "release of %s answered %v\n", subject, res)
				return 1
			}
		}
		if err := enc.Encode(h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func storeURLFor(t *testing.T, b backend) string {
	loc := b.newLocation(t)
	if b.name == "fs" {
		return "file://" + loc
	}
	return loc
}

func racerCmd(t *testing.T, mode, url string, extra ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), racerEnv+"="+mode, racerStoreEnv+"="+url)
	cmd.Env = append(cmd.Env, s3srv.Env()...)
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

// TestManyProcessesHoldIntervalsNeverOverlap races 8 OS processes over the
// same subjects, through the fs store and through the s3 store. Every winner
// records its hold interval in store-clock time; no two intervals of one
// subject may overlap.
func TestManyProcessesHoldIntervalsNeverOverlap(t *testing.T) {
	for _, b := range backends() {
		if b.name == "mem" {
			continue // one process only
		}
		t.Run(b.name, func(t *testing.T) {
			url := storeURLFor(t, b)
			dir := t.TempDir()
			const procs = 8
			var cmds []*exec.Cmd
			for i := 0; i < procs; i++ {
				cmd := racerCmd(t, "race", url, racerOutEnv+"="+filepath.Join(dir, strconv.Itoa(i)+".jsonl"), racerRunEnv+"=10s")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, cmd)
				t.Cleanup(func() {
					if t.Failed() && stderr.Len() > 0 {
						t.Logf("racer %d stderr: %s", i, stderr.String())
					}
				})
			}
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Errorf("racer %d: %v", i, err)
				}
			}
			bySubject := map[string][]hold{}
			owners := map[string]bool{}
			total := 0
			for i := 0; i < procs; i++ {
				f, err := os.Open(filepath.Join(dir, strconv.Itoa(i)+".jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					var h hold
					if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
						t.Fatal(err)
					}
					bySubject[h.Subject] = append(bySubject[h.Subject], h)
					owners[h.Owner] = true
					total++
				}
				f.Close()
			}
			if total < 100 || len(owners) < procs/2 {
				t.Fatalf("only %d holds by %d processes: not enough contention to prove anything", total, len(owners))
			}
			for subject, hs := range bySubject {
				sort.Slice(hs, func(i, j int) bool { return hs[i].Start.Before(hs[j].Start) })
				for i := 1; i < len(hs); i++ {
					if hs[i].Start.Before(hs[i-1].End) {
						t.Errorf("%s: hold %s by %s [%v, %v] overlaps hold %s by %s starting %v",
							subject, hs[i-1].Token, hs[i-1].Owner, hs[i-1].Start, hs[i-1].End, hs[i].Token, hs[i].Owner, hs[i].Start)
					}
				}
			}
			t.Logf("%d holds by %d processes over %d subjects, none overlapping", total, len(owners), len(bySubject))
		})
	}
}

// Checks 3.1 and 3.2 with a real death: a process takes a lease and is
// killed with SIGKILL. Its key stays held through the instant and is taken
// right after.
func TestKilledHolderKeyStaysHeldThroughInstant(t *testing.T) {
	for _, b := range backends() {
		if b.name == "mem" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			url := storeURLFor(t, b)
			cmd := racerCmd(t, "hold", url)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("holder printed nothing: %v", err)
			}
			var rec lease.Record
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			s, err := objstore.Open(bg(t), url, objstore.OpenOptions{S3: objstore.S3Options{Credentials: s3srv.Credentials()}})
			if err != nil {
				t.Fatal(err)
			}
			attempts := pollUntilTaken(t, newManager(t, s, clock.Real{}), rec.SubjectID, 25*time.Millisecond, 15*time.Second)
			checkTakenAtInstantNotBefore(t, b, s, attempts, rec.ExpiresAt)
		})
	}
}
