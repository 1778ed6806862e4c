package objstore_test

import (
	"strings"
	"testing"

	"github.com/stado/stado/objstore"
)

// TestStoreURLCredentialsRefusedAndNeverShown is the regression test of a
// bug the reliability suite found: credentials written into the store URL
// (s3://KEY:SECRET@bucket, or endpoint=http://KEY:SECRET@host) were accepted,
// and `stado optimize status` printed the endpoint's, secret and all, on its
// "store:" line. Such a URL is refused, and no message shows them.
func TestStoreURLCredentialsRefusedAndNeverShown(t *testing.T) {
	const key, secret = "AKIAEXAMPLEKEYID", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	for _, raw := range []string{
		"s3://" + key + ":" + secret + "@bucket/prefix?region=r",
		"s3://" + key + "@bucket/prefix",
		"s3://bucket/prefix?endpoint=http://" + key + ":" + secret + "@127.0.0.1:9000&path_style=true",
		"s3://bucket/prefix?endpoint=http%3A%2F%2F" + key + "%3A" + secret + "%40127.0.0.1%3A9000",
		"s3://" + key + ":" + secret + "@bucket/prefix?regoin=typo",
		"file://" + key + ":" + secret + "@localhost/x",
	} {
		_, err := objstore.ParseURL(raw)
		if err == nil {
			t.Errorf("ParseURL accepted a URL with credentials: %s", objstore.RedactURL(raw))
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), key) {
			t.Errorf("ParseURL's error shows the credentials: %v", err)
		}
		if !strings.Contains(err.Error(), "credentials do not belong") {
			t.Errorf("ParseURL's error does not say why: %v", err)
		}
		if r := objstore.RedactURL(raw); strings.Contains(r, secret) || strings.Contains(r, key) {
			t.Errorf("RedactURL(%q) = %q", raw, r)
		}
	}
	for _, clean := range []string{"s3://b/p?endpoint=http://h:9000&path_style=true", "s3://b/pre@fix?region=r", "s3://b/p?endpoint=http%3A%2F%2Fh%3A9000"} {
		if got := objstore.RedactURL(clean); got != clean {
			t.Errorf("RedactURL changed a URL without credentials: %q", got)
		}
		if _, err := objstore.ParseURL(clean); err != nil {
			t.Errorf("ParseURL(%q): %v", clean, err)
		}
	}
}
