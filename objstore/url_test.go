package objstore_test

import (
	"strings"
	"testing"

	"github.com/stado/stado/objstore"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    objstore.Location
		wantErr string
	}{
		{in: "/var/lib/stado", want: objstore.Location{Kind: "fs", Dir: "/var/lib/stado"}},
		{in: "relative/dir", want: objstore.Location{Kind: "fs", Dir: "relative/dir"}},
		{in: "file:///var/lib/stado", want: objstore.Location{Kind: "fs", Dir: "/var/lib/stado"}},
		{in: "s3://fleet-state/prod?region=eu-west-1", want: objstore.Location{Kind: "s3", S3: objstore.S3Options{Bucket: "fleet-state", Prefix: "prod", Region: "eu-west-1"}}},
		{in: "s3://b?endpoint=http://127.0.0.1:9000&path_style=true", want: objstore.Location{Kind: "s3", S3: objstore.S3Options{Bucket: "b", Endpoint: "http://127.0.0.1:9000", PathStyle: true}}},
		{in: "", wantErr: "empty store URL"},
		{in: "file://host/x", wantErr: "three slashes"},
		{in: "s3:///prefix", wantErr: "no bucket"},
		{in: "s3://b?regoin=x", wantErr: `unknown parameter "regoin"`},
		{in: "s3://b?path_style=maybe", wantErr: "true or false"},
		{in: "s3://b?endpoint=ftp://x", wantErr: "http:// or https://"},
		{in: "gs://b", wantErr: `unsupported scheme "gs"`},
	} {
		got, err := objstore.ParseURL(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseURL(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if got.Kind != tc.want.Kind || got.Dir != tc.want.Dir || got.S3.Bucket != tc.want.S3.Bucket || got.S3.Prefix != tc.want.S3.Prefix ||
			got.S3.Region != tc.want.S3.Region || got.S3.Endpoint != tc.want.S3.Endpoint || got.S3.PathStyle != tc.want.S3.PathStyle {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestDefaultDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if d, _ := objstore.DefaultDir(env(map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/a"})); d != "/x/state/stado" {
		t.Errorf("with XDG_STATE_HOME: %q", d)
	}
	if d, _ := objstore.DefaultDir(env(map[string]string{"HOME": "/home/a"})); d != "/home/a/.local/state/stado" {
		t.Errorf("with HOME only: %q", d)
	}
	if d, _ := objstore.DefaultDir(env(map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/a"})); d != "/home/a/.local/state/stado" {
		t.Errorf("a relative XDG_STATE_HOME must be ignored (XDG spec): %q", d)
	}
	if _, err := objstore.DefaultDir(env(nil)); err == nil {
		t.Error("no HOME and no XDG_STATE_HOME must be an error")
	}
}
