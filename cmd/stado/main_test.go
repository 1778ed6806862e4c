package main

import (
	"os"
	"testing"

	"github.com/stado/stado/internal/s3test"
)

// s3srv is the S3 server the built-binary tests use, started once.
var s3srv *s3test.Server

func TestMain(m *testing.M) { os.Exit(s3test.RunTests(m, &s3srv)) }
