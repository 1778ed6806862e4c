package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stado/stado/internal/clock"
)

// S3Options configures the s3 backend.
type S3Options struct {
	Bucket string
	// Prefix is prepended, with a slash, to every key (s3://bucket/prefix).
	Prefix string
	Region string
	// Endpoint is a custom endpoint URL for S3-compatible stores.
	Endpoint  string
	PathStyle bool
	// Credentials overrides the standard credential chain (environment,
	// shared profile, container and instance metadata) when set.
	Credentials aws.CredentialsProvider
	// HTTPClient overrides the HTTP client (tests put a fault injector here).
	HTTPClient aws.HTTPClient
	// RetryMaxAttempts is the SDK's attempts per operation (default 3).
	RetryMaxAttempts int
	// Timeout bounds each HTTP attempt (default 30s).
	Timeout time.Duration
	// Clock is the local clock; only its monotonic differences are used.
	Clock clock.Clock
	// ClockMaxAge is how long a Date sample is trusted (default 10m).
	ClockMaxAge time.Duration
}

// S3 is the Store on an S3-compatible object store with conditional writes
// (If-None-Match: * on create, If-Match on put and delete). Its clock is the
// server's: every response's Date header is recorded.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string // "" or ends with "/"
	loc    string
	clock  *sampledClock

	mu       sync.Mutex
	requests map[string]int64
}

// NewS3 builds the s3 backend. It sends no request.
func NewS3(ctx context.Context, o S3Options) (*S3, error) {
	if o.Bucket == "" {
		return nil, errors.New("s3 store: no bucket given: use s3://BUCKET/PREFIX")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.RetryMaxAttempts <= 0 {
		o.RetryMaxAttempts = 3
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	loadOpts := []func(*config.LoadOptions) error{config.WithRetryMaxAttempts(o.RetryMaxAttempts)}
	if o.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(o.Credentials))
	}
	httpClient := o.HTTPClient
	if httpClient == nil {
		// The SDK keeps 10 idle connections per host; a tick reads and
		// writes at a concurrency of 32 to 128, and every connection beyond
		// the pool would be a new TCP (and TLS) handshake.
		httpClient = awshttp.NewBuildableClient().WithTimeout(o.Timeout).WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = 256
			t.MaxIdleConnsPerHost = 256
		})
	}
	loadOpts = append(loadOpts, config.WithHTTPClient(httpClient))
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3 store: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	st := &S3{
		bucket:   o.Bucket,
		prefix:   strings.Trim(o.Prefix, "/"),
		clock:    newSampledClock(o.Clock, o.ClockMaxAge),
		requests: make(map[string]int64),
	}
	if st.prefix != "" {
		st.prefix += "/"
	}
	st.loc = "s3://" + o.Bucket + "/" + st.prefix
	if o.Endpoint != "" {
		st.loc += " at " + o.Endpoint
	}
	local := o.Clock
	st.client = s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		// Checksums only where the API requires them: S3-compatible stores
		// differ in their support for the SDK's default trailing checksums.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.APIOptions = append(so.APIOptions, func(stack *middleware.Stack) error {
			return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("stadoStoreClock",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					sent := local.Now()
					out, md, err := next.HandleDeserialize(ctx, in)
					received := local.Now()
					st.count(middleware.GetOperationName(ctx))
					resp, ok := out.RawResponse.(*smithyhttp.Response)
					if ok && resp != nil {
						if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
							st.clock.observe(d, sent, received)
						}
					}
					// This runs below the SDK's deserializers: a 5xx
					// arrives here as a response, a reset as an error.
					if a, aok := ctx.Value(attemptsKey{}).(*attempts); aok && (!ok || resp == nil || resp.StatusCode >= 500) {
						a.unanswered.Store(true)
					}
					return out, md, err
				}), middleware.After)
		})
	})
	return st, nil
}

func (s *S3) count(op string) {
	s.mu.Lock()
	s.requests[op]++
	s.mu.Unlock()
}

// Requests returns how many HTTP requests (attempts, retries included) the
// backend has sent, by S3 operation name.
func (s *S3) Requests() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.requests))
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// Location implements Store.
func (s *S3) Location() string { return s.loc }

func (s *S3) objectKey(key string) *string { return aws.String(s.prefix + key) }

func quoteETag(etag string) *string { return aws.String(`"` + etag + `"`) }

func unquoteETag(etag *string) string {
	if etag == nil {
		return ""
	}
	return strings.Trim(*etag, `"`)
}

// errConflict marks S3's 409 ConditionalRequestConflict: another conditional
// write to the key was in flight. It is retried, never returned.
var errConflict = errors.New("conditional request conflict")

// s3Error classifies an SDK error.
func (s *S3) s3Error(op, key string, err error) error {
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch code {
	case "NoSuchBucket":
		return fmt.Errorf("store %s %s: bucket %q does not exist at %s: create it, or fix the store URL: %w", op, key, s.bucket, s.loc, err)
	case "NoSuchKey", "NotFound":
		return opError(op, key, ErrNotFound, nil)
	case "PreconditionFailed":
		return opError(op, key, ErrPrecondition, nil)
	case "ConditionalRequestConflict":
		return errConflict
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "RequestTimeTooSkewed":
		return opError(op, key, ErrDenied, err)
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		switch st := re.HTTPStatusCode(); {
		case st == http.StatusNotFound:
			return opError(op, key, ErrNotFound, nil)
		case st == http.StatusPreconditionFailed:
			return opError(op, key, ErrPrecondition, nil)
		case st == http.StatusConflict:
			return errConflict
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			return opError(op, key, ErrDenied, err)
		case st >= 500:
			return opError(op, key, ErrUnavailable, err)
		default:
			return fmt.Errorf("store %s %s: %w", op, key, err)
		}
	}
	// No HTTP response at all: connection refused or reset, DNS, timeout,
	// cancelled context.
	return opError(op, key, ErrUnavailable, err)
}

// retryConflict runs a conditional write again while the store answers 409
// (a concurrent conditional write to the same key was in flight).
func (s *S3) retryConflict(ctx context.Context, do func() error) error {
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := do()
		if !errors.Is(err, errConflict) {
			return err
		}
		if attempt == 8 {
			return fmt.Errorf("store: the key stayed in conflict after %d attempts: %w", attempt+1, ErrUnavailable)
		}
		d := backoff/2 + rand.N(backoff)
		if err := (clock.Real{}).Sleep(ctx, d); err != nil {
			return err
		}
		backoff *= 2
	}
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) (Object, error) {
	if err := ValidKey(key); err != nil {
		return Object{}, opError("get", key, err, nil)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: s.objectKey(key)})
	if err != nil {
		return Object{}, s.s3Error("get", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		return Object{}, opError("get", key, ErrUnavailable, err)
	}
	o := Object{Key: key, Body: body, ETag: unquoteETag(out.ETag)}
	if out.LastModified != nil {
		o.ModTime = *out.LastModified
	}
	return o, nil
}

func (s *S3) put(ctx context.Context, op, key string, body []byte, ifMatch, ifNoneMatch *string) (string, error) {
	if err := ValidKey(key); err != nil {
		return "", opError(op, key, err, nil)
	}
	var etag string
	err := s.retryConflict(ctx, func() error {
		out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        &s.bucket,
			Key:           s.objectKey(key),
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))),
			IfMatch:       ifMatch,
			IfNoneMatch:   ifNoneMatch,
		})
		if err != nil {
			err = s.s3Error(op, key, err)
			// If-Match against a missing key: the condition did not hold.
			if ifMatch != nil && errors.Is(err, ErrNotFound) {
				return opError(op, key, ErrPrecondition, nil)
			}
			return err
		}
		etag = unquoteETag(out.ETag)
		return nil
	})
	return etag, err
}

// Create implements Store.
func (s *S3) Create(ctx context.Context, key string, body []byte) (string, error) {
	return s.put(ctx, "create", key, body, nil, aws.String("*"))
}

// PutIfMatch implements Store.
func (s *S3) PutIfMatch(ctx context.Context, key string, body []byte, etag string) (string, error) {
	return s.put(ctx, "put-if-match", key, body, quoteETag(etag), nil)
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, body []byte) (string, error) {
	return s.put(ctx, "put", key, body, nil, nil)
}

// attempts records, across the SDK's retries of one operation, whether an
// attempt went unanswered (no response, or a 5xx): such an attempt may have
// committed.
type attempts struct{ unanswered atomic.Bool }

type attemptsKey struct{}

// DeleteIfMatch implements Store.
//
// A retried delete whose first attempt committed, but went unanswered, finds
// the key gone: AWS S3 answers the retry 404 (Versity Gateway 204). That 404
// is not "no such object" but "this delete may have been the one that
// removed it": it is returned as ErrUnavailable, the outcome unknown, so
// that a lease release reads back instead of reporting that someone else
// removed the lease.
func (s *S3) DeleteIfMatch(ctx context.Context, key, etag string) error {
	if err := ValidKey(key); err != nil {
		return opError("delete-if-match", key, err, nil)
	}
	return s.retryConflict(ctx, func() error {
		a := &attempts{}
		_, err := s.client.DeleteObject(context.WithValue(ctx, attemptsKey{}, a), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.objectKey(key), IfMatch: quoteETag(etag)})
		if err != nil {
			err = s.s3Error("delete-if-match", key, err)
			if errors.Is(err, ErrNotFound) && a.unanswered.Load() {
				return opError("delete-if-match", key, ErrUnavailable,
					errors.New("an earlier attempt went unanswered and its retry found no object: the delete may have landed"))
			}
			return err
		}
		return nil
	})
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return opError("delete", key, err, nil)
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.objectKey(key)})
	if err != nil {
		err = s.s3Error("delete", key, err)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List implements Store, following continuation tokens page by page.
func (s *S3) List(ctx context.Context, prefix string, fn func(Entry) error) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.s3Error("list", prefix, err)
		}
		for _, o := range page.Contents {
			if o.Key == nil {
				continue
			}
			e := Entry{Key: strings.TrimPrefix(*o.Key, s.prefix)}
			if o.Size != nil {
				e.Size = *o.Size
			}
			if o.LastModified != nil {
				e.ModTime = *o.LastModified
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Now implements Store. A recent response's Date answers without a request;
// otherwise the bucket is asked (HEAD) and its Date recorded.
func (s *S3) Now(ctx context.Context) (TimeBounds, error) {
	if b, ok := s.clock.read(); ok {
		return b, nil
	}
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err != nil {
		cerr := s.s3Error("clock", s.bucket, err)
		if !errors.Is(cerr, ErrNotFound) {
			return TimeBounds{}, cerr
		}
		return TimeBounds{}, fmt.Errorf("store clock: bucket %q does not exist at %s: create it, or fix the store URL", s.bucket, s.loc)
	}
	if b, ok := s.clock.read(); ok {
		return b, nil
	}
	return TimeBounds{}, fmt.Errorf("store clock: %s sent no usable Date header; stado judges leases on the store's clock and needs it", s.loc)
}
