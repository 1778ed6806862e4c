package autonomy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stado/stado/objstore"
)

// TestUpdateStopsAfterThreeUnansweredWrites is the regression test of a bug
// the reliability suite found (503 SlowDown on every PUT of control.json):
// `stado optimize pause` during a store outage retried its write 64 times,
// each already retried by the S3 client with backoff, and answered only
// after 87 seconds. An unanswered write is read back (it may have landed),
// but a store that answers none of three is out: say so now.
func TestUpdateStopsAfterThreeUnansweredWrites(t *testing.T) {
	mem, _ := newMem()
	fs := &faultStore{Store: mem, onWrite: func(int, func() (string, error)) (string, error) { return "", errLost }}
	_, err := Pause(context.Background(), fs, "maintenance", "alice")
	if !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer 3 writes") {
		t.Fatalf("Pause = %v, want ErrUnavailable saying the store did not answer", err)
	}
	if fs.writes != unansweredAttempts {
		t.Errorf("%d writes attempted, want %d", fs.writes, unansweredAttempts)
	}
	if st := mustLoad(t, mem); st.Exists {
		t.Errorf("a control object was stored: %+v", st.Control)
	}
	// Writes that land but lose their answer are still found by reading back.
	fs = &faultStore{Store: mem, onWrite: func(_ int, do func() (string, error)) (string, error) { _, _ = do(); return "", errLost }}
	if _, err := Pause(context.Background(), fs, "maintenance", "alice"); err != nil || fs.writes != 1 {
		t.Fatalf("Pause whose write landed = %v after %d writes, want success after one", err, fs.writes)
	}
}
