package objstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/stado/stado/internal/clock"
	"github.com/stado/stado/internal/s3test"
	"github.com/stado/stado/objstore"
	"github.com/stado/stado/objstore/storetest"
)

// s3srv is the package's S3 server, started once in TestMain.
var s3srv *s3test.Server

func TestMain(m *testing.M) {
	os.Exit(s3test.RunTests(m, &s3srv))
}

func newS3(t *testing.T, o objstore.S3Options) *objstore.S3 {
	t.Helper()
	o.Bucket = s3srv.Bucket(t)
	o.Region = s3srv.Region
	o.Endpoint = s3srv.Endpoint
	o.PathStyle = true
	o.Credentials = s3srv.Credentials()
	if o.Prefix == "" {
		o.Prefix = "prefix/under/test"
	}
	s, err := objstore.NewS3(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformanceMem(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		return objstore.NewMem(clock.Real{})
	}, storetest.Options{})
}

func TestConformanceFS(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewFS(t.TempDir(), clock.Real{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.Options{})
}

func TestConformanceS3(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		return newS3(t, objstore.S3Options{})
	}, storetest.Options{DeleteIfMatchMissingMaySucceed: true, DeleteIfMatchRacesPut: true})
}
