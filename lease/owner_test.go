package lease

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

func TestProcessOwnerNamesHostPidAndIsUnique(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	want := regexp.MustCompile("^" + regexp.QuoteMeta(host+"/"+strconv.Itoa(os.Getpid())+"/") + "[0-9a-f]{8}$")
	a, b := ProcessOwner(), ProcessOwner()
	if !want.MatchString(a) || !want.MatchString(b) {
		t.Fatalf("ProcessOwner = %q, %q; want host/pid/8 hex digits", a, b)
	}
	if a == b {
		t.Errorf("two owners of one process are equal (%q): the random part is missing", a)
	}
}
