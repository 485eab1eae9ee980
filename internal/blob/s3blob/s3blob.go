// Package s3blob stores blobs in a bucket of an S3-compatible object store
// (AWS S3, or a server speaking its API), through the AWS SDK for Go v2.
//
// Layout: blob "a/b/c" is the object "<prefix>a/b/c.blob", holding the
// blob's bytes followed by blob's footer (size and sha256, see
// blob.AppendFooter) — the same bytes as fsblob's file for that key. The
// footer, not object metadata, carries the checksum because metadata is sent
// before the body, and a blob streamed from a reader of unknown length has
// its sha256 only at the end. The ".blob" suffix (which no key segment may
// end with) keeps a blob "a" and the blobs under "a/" apart on servers that
// map object names to files and directories (a posix gateway cannot hold a
// file "a" and a directory "a").
//
// Writes are atomic: a blob that fits in one part is one PutObject, a larger
// one a multipart upload that only becomes visible at
// CompleteMultipartUpload. A writer that dies mid-upload leaves an incomplete
// multipart upload, never a partial object; RemoveTemp aborts those.
//
// A Get is one suffix-range GET for the footer (with up to 64 KiB before
// it, so a small blob comes whole) and, for a larger blob, a second for the
// bytes with If-Match on the footer's ETag, so a blob replaced in between
// is read again rather than checked against the wrong footer. List walks
// the key space level by level (delimiter "/") and reads each blob's
// footer, a few at a time.
package s3blob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Part sizes of multipart uploads. S3 takes parts of 5 MiB and more (the
// last may be smaller) and at most 10,000 of them, so DefaultPartSize allows
// blobs of up to about 78 GiB.
const (
	MinPartSize        = 5 << 20
	DefaultPartSize    = 8 << 20
	DefaultConcurrency = 4
	maxParts           = 10_000
)

// Options configure Open. The field names in errors ("blob.bucket") are the
// [blob] keys of agentkernel.toml, which map one to one onto these fields.
type Options struct {
	// Endpoint is the server's base URL, e.g. https://s3.us-east-1.amazonaws.com
	// or http://127.0.0.1:7070.
	Endpoint string
	// Region signs requests (default us-east-1, which most S3-compatible
	// servers accept).
	Region string
	Bucket string
	// Prefix is prepended to every object name: "" or segments ending in "/",
	// e.g. "agentkernel/". Several deployments can share a bucket this way.
	Prefix string
	// AccessKeyID and SecretAccessKey are required; SessionToken is for
	// temporary credentials.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// PathStyle addresses the bucket in the path (http://host/bucket/key)
	// instead of the host name (http://bucket.host/key). Most self-hosted
	// servers need it.
	PathStyle bool

	// PartSize of multipart uploads (default DefaultPartSize, at least
	// MinPartSize); a Put holds at most Concurrency+1 parts in memory.
	PartSize int64
	// Concurrency is the number of parts of one Put uploaded at once
	// (default DefaultConcurrency).
	Concurrency int
	// HTTPClient replaces the SDK's default client.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Store is an S3 blob.Store. It is safe for concurrent use, also by several
// processes (daemons on several hosts) sharing the bucket and prefix.
type Store struct {
	client   *s3.Client
	http     *http.Client
	bucket   string
	prefix   string
	partSize int64
	conc     int
	log      *slog.Logger
	bufs     sync.Pool
	heldBufs atomic.Int64
	peakBufs atomic.Int64
	// uploads holds the multipart upload ids of this process's Puts in
	// flight, which RemoveTemp never aborts whatever their age.
	uploads sync.Map
}

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.TempRemover = (*Store)(nil)
)

// Open checks opts, connects and lists the prefix once, so a wrong endpoint,
// bucket, region or credential fails here with an error naming the field,
// not at the first write.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	region := opts.Region
	if region == "" {
		region = "us-east-1"
	}
	creds := aws.Credentials{AccessKeyID: opts.AccessKeyID, SecretAccessKey: opts.SecretAccessKey,
		SessionToken: opts.SessionToken, Source: "agentkernel [blob] configuration"}
	o := s3.Options{
		BaseEndpoint: aws.String(strings.TrimSuffix(opts.Endpoint, "/")),
		Region:       region,
		Credentials:  aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		UsePathStyle: opts.PathStyle,
		// Only the checksums an operation requires: the SDK's default CRC32
		// headers are refused by a number of S3-compatible servers, and every
		// blob already carries its sha256, checked by every full Get.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Every Put keeps Concurrency parts in flight: keep enough idle
		// connections to the one host for several Puts.
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: tr}
	}
	o.HTTPClient = hc
	s := &Store{
		client:   s3.New(o),
		http:     hc,
		bucket:   opts.Bucket,
		prefix:   opts.Prefix,
		partSize: opts.PartSize,
		conc:     opts.Concurrency,
		log:      opts.Logger,
	}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.conc == 0 {
		s.conc = DefaultConcurrency
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.bufs.New = func() any { b := make([]byte, s.partSize); return &b }
	if err := s.probe(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// check refuses options that cannot work, naming the field.
func (o Options) check() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("s3blob: blob.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := CheckEndpoint(o.Endpoint); err != nil {
		bad("endpoint", "%v", err)
	}
	if err := CheckBucketName(o.Bucket); err != nil {
		bad("bucket", "%v", err)
	}
	if err := CheckPrefix(o.Prefix); err != nil {
		bad("prefix", "%v", err)
	}
	if o.AccessKeyID == "" {
		bad("access_key_id", "required (or AWS_ACCESS_KEY_ID in the environment)")
	}
	if o.SecretAccessKey == "" {
		bad("secret_access_key", "required (or AWS_SECRET_ACCESS_KEY in the environment)")
	}
	if o.PartSize != 0 && o.PartSize < MinPartSize {
		errs = append(errs, fmt.Errorf("s3blob: PartSize %d is below S3's minimum part size of %d bytes", o.PartSize, MinPartSize))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("s3blob: Concurrency %d is negative", o.Concurrency))
	}
	return errors.Join(errs...)
}

// CheckEndpoint accepts an http or https base URL without credentials,
// query or fragment.
func CheckEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New("required: the server's base URL, e.g. https://s3.us-east-1.amazonaws.com or http://127.0.0.1:7070")
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an http or https URL without credentials, query or fragment", endpoint)
	}
	return nil
}

// CheckBucketName applies S3's bucket naming rules: 3 to 63 lowercase
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit.
func CheckBucketName(name string) error {
	if name == "" {
		return errors.New("required")
	}
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("%q: bucket names are 3 to 63 characters long", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("%q: bucket names hold only lowercase letters, digits, dots and hyphens", name)
		}
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return fmt.Errorf("%q: bucket names start and end with a letter or digit", name)
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// CheckPrefix accepts "" or key segments followed by "/" ("agentkernel/",
// "prod/blobs/"): the same rules as blob keys, so a prefix cannot escape
// anything or collide with an engine's reserved names.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%q must end with /", prefix)
	}
	if err := blob.ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("%q: %s", prefix, err.(*blob.KeyError).Reason)
	}
	return nil
}

// Close releases idle connections. Readers already returned by Get stay
// usable.
func (s *Store) Close() error {
	s.http.CloseIdleConnections()
	return nil
}

// objectName maps a validated key to its object.
func (s *Store) objectName(key string) string { return s.prefix + key + blob.ReservedSuffix }

// requestTimeout bounds the clean-up calls (abort of a failed upload) that
// run after the caller's context is done.
const requestTimeout = 30 * time.Second
