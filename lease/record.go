package lease

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Prefix is where every lease object lives.
const Prefix = "state/autonomy/leases/"

// SchemaVersion is the version of the lease object this package writes.
const SchemaVersion = 1

// Key returns the object key of subject's lease:
// state/autonomy/leases/<sha256hex(subject)>.json. The subject is hashed as
// bytes, never normalised: two subjects that differ by a byte are two leases.
func Key(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return Prefix + hex.EncodeToString(sum[:]) + ".json"
}

// Record is the stored lease object (DESIGN §5).
type Record struct {
	SchemaVersion int       `json:"schema_version"`
	SubjectID     string    `json:"subject_id"`
	DecisionID    string    `json:"decision_id"`
	Token         string    `json:"token"`
	Holder        string    `json:"holder"`
	Owner         string    `json:"owner"`
	AcquiredAt    time.Time `json:"acquired_at"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// ErrUnreadable marks a stored lease object that is not a valid lease.
var ErrUnreadable = errors.New("unreadable lease object")

// ParseRecord decodes and checks a stored lease object. Any defect is an
// error wrapping ErrUnreadable; it never panics.
func ParseRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	switch {
	case r.SchemaVersion != SchemaVersion:
		return Record{}, fmt.Errorf("%w: schema_version %d, want %d", ErrUnreadable, r.SchemaVersion, SchemaVersion)
	case r.SubjectID == "":
		return Record{}, fmt.Errorf("%w: no subject_id", ErrUnreadable)
	case r.Token == "":
		return Record{}, fmt.Errorf("%w: no token", ErrUnreadable)
	case r.Holder == "":
		return Record{}, fmt.Errorf("%w: no holder", ErrUnreadable)
	case r.AcquiredAt.IsZero() || r.ExpiresAt.IsZero():
		return Record{}, fmt.Errorf("%w: no acquired_at or expires_at", ErrUnreadable)
	case r.ExpiresAt.Before(r.AcquiredAt):
		return Record{}, fmt.Errorf("%w: expires_at %s is before acquired_at %s", ErrUnreadable,
			r.ExpiresAt.Format(time.RFC3339Nano), r.AcquiredAt.Format(time.RFC3339Nano))
	}
	return r, nil
}

func (r Record) marshal() []byte {
	r.AcquiredAt = r.AcquiredAt.UTC()
	r.ExpiresAt = r.ExpiresAt.UTC()
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of strings, ints and times always marshals
	}
	return b
}
