package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/stado/stado/internal/clock"
)

// Location is a parsed store URL.
type Location struct {
	// Kind is "fs" or "s3".
	Kind string
	// Dir is the fs store's directory.
	Dir string
	// S3 is the s3 store's configuration (credentials come from the
	// standard chain).
	S3 S3Options
}

// DefaultDir is the embedded store's directory when no store is configured:
// $XDG_STATE_HOME/stado, else ~/.local/state/stado. getenv is os.Getenv in
// production.
func DefaultDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "stado"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("no store configured and neither XDG_STATE_HOME nor HOME is set: pass --store PATH or set STADO_STORE")
	}
	return filepath.Join(home, ".local", "state", "stado"), nil
}

// ParseURL parses a store URL: a path, file:///path, or
// s3://bucket/prefix?region=R&endpoint=URL&path_style=true.
func ParseURL(raw string) (Location, error) {
	if raw == "" {
		return Location{}, errors.New("empty store URL: pass a directory, file:///PATH or s3://BUCKET/PREFIX")
	}
	if !strings.Contains(raw, "://") {
		return Location{Kind: "fs", Dir: raw}, nil
	}
	// Messages show the URL without its user information, where
	// credentials would be.
	shown := RedactURL(raw)
	if shown != raw {
		return Location{}, fmt.Errorf("store URL %q: %s", shown, credentialsHint)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, fmt.Errorf("store URL %q is not a URL: use a directory, file:///PATH or s3://BUCKET/PREFIX", shown)
	}
	if u.User != nil {
		return Location{}, fmt.Errorf("store URL %q: %s", shown, credentialsHint)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("store URL %q: a file URL names a local path: use file:///PATH (three slashes)", shown)
		}
		if u.Path == "" {
			return Location{}, fmt.Errorf("store URL %q has no path: use file:///PATH", shown)
		}
		return Location{Kind: "fs", Dir: u.Path}, nil
	case "s3":
		if u.Host == "" {
			return Location{}, fmt.Errorf("store URL %q has no bucket: use s3://BUCKET/PREFIX", shown)
		}
		o := S3Options{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
		for k, vs := range u.Query() {
			v := vs[len(vs)-1]
			switch k {
			case "region":
				o.Region = v
			case "endpoint":
				eu, err := url.Parse(v)
				if err == nil && eu.User != nil {
					return Location{}, fmt.Errorf("store URL %q: endpoint: %s", shown, credentialsHint)
				}
				if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
					return Location{}, fmt.Errorf("store URL %q: endpoint %q must be an http:// or https:// URL", shown, RedactURL(v))
				}
				o.Endpoint = v
			case "path_style":
				b, err := strconv.ParseBool(v)
				if err != nil {
					return Location{}, fmt.Errorf("store URL %q: path_style=%q must be true or false", shown, v)
				}
				o.PathStyle = b
			default:
				return Location{}, fmt.Errorf("store URL %q: unknown parameter %q (known: region, endpoint, path_style)", shown, k)
			}
		}
		return Location{Kind: "s3", S3: o}, nil
	default:
		return Location{}, fmt.Errorf("store URL %q: unsupported scheme %q: use a directory, file:///PATH or s3://BUCKET/PREFIX", shown, u.Scheme)
	}
}

// credentialsHint says where credentials go instead of a store URL.
const credentialsHint = "credentials do not belong in a store URL, which is shown in messages and status: " +
	"remove the USER:PASSWORD@ part and give them through the standard chain " +
	"(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a shared profile, or instance metadata)"

// userinfo matches the user information of a URL, or of a URL embedded
// (perhaps percent-encoded) in a query parameter: USER@, or USER:SECRET@
// where the secret may hold unescaped slashes (AWS secret keys do).
var userinfo = regexp.MustCompile(`(?i)(://|%3a%2f%2f)(?:[^/?#&@]*|[^/?#&@:]*(?::|%3a)[^?#&]*)(?:@|%40)`)

// RedactURL returns a store URL fit for a message: without the user
// information of the URL or of its endpoint parameter, where credentials
// would be. Everything else is kept as written.
func RedactURL(raw string) string { return userinfo.ReplaceAllString(raw, "$1") }

// OpenOptions carries what Open needs besides the URL.
type OpenOptions struct {
	Clock clock.Clock
	// Allowlist is the write allowlist (default DefaultAllowlist).
	Allowlist []string
	// S3 overrides fields of the parsed s3 options that a URL cannot carry
	// (an HTTP client, credentials); zero fields are ignored.
	S3 S3Options
}

// Open opens the store a URL names, wrapped in the write allowlist.
func Open(ctx context.Context, raw string, o OpenOptions) (Store, error) {
	loc, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	var s Store
	switch loc.Kind {
	case "fs":
		s, err = NewFS(loc.Dir, o.Clock)
	case "s3":
		so := loc.S3
		so.Clock = o.Clock
		if o.S3.HTTPClient != nil {
			so.HTTPClient = o.S3.HTTPClient
		}
		if o.S3.Credentials != nil {
			so.Credentials = o.S3.Credentials
		}
		if o.S3.RetryMaxAttempts != 0 {
			so.RetryMaxAttempts = o.S3.RetryMaxAttempts
		}
		if o.S3.Timeout != 0 {
			so.Timeout = o.S3.Timeout
		}
		s, err = NewS3(ctx, so)
	}
	if err != nil {
		return nil, err
	}
	return Allowlist(s, o.Allowlist...), nil
}
