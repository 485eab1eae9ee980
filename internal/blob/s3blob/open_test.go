package s3blob

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestOpenRefusesBadOptions: options that cannot work are refused before
// any request, each error naming the [blob] key to fix.
func TestOpenRefusesBadOptions(t *testing.T) {
	good := Options{Endpoint: "http://127.0.0.1:1", Bucket: "b-1", AccessKeyID: "k", SecretAccessKey: "s", PathStyle: true}
	for _, tc := range []struct {
		field string
		edit  func(*Options)
	}{
		{"blob.endpoint", func(o *Options) { o.Endpoint = "" }},
		{"blob.endpoint", func(o *Options) { o.Endpoint = "ftp://host" }},
		{"blob.endpoint", func(o *Options) { o.Endpoint = "http://user:pw@host" }},
		{"blob.bucket", func(o *Options) { o.Bucket = "" }},
		{"blob.bucket", func(o *Options) { o.Bucket = "Upper_Case" }},
		{"blob.bucket", func(o *Options) { o.Bucket = "ab" }},
		{"blob.prefix", func(o *Options) { o.Prefix = "no-slash" }},
		{"blob.prefix", func(o *Options) { o.Prefix = "../up/" }},
		{"blob.prefix", func(o *Options) { o.Prefix = "/abs/" }},
		{"blob.prefix", func(o *Options) { o.Prefix = "a//" }},
		{"blob.access_key_id", func(o *Options) { o.AccessKeyID = "" }},
		{"blob.secret_access_key", func(o *Options) { o.SecretAccessKey = "" }},
		{"PartSize", func(o *Options) { o.PartSize = 1 << 20 }},
	} {
		o := good
		tc.edit(&o)
		s, err := Open(context.Background(), o)
		if err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded, want an error naming %s", o, tc.field)
		} else if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Open(%+v) error %q does not name %s", o, err, tc.field)
		}
	}
}

// TestOpenBadServerSide: a missing bucket, an unknown access key, a wrong
// secret and an endpoint nobody listens on fail at Open, naming the field.
func TestOpenBadServerSide(t *testing.T) {
	base := testOptions(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name, field string
		edit        func(*Options)
	}{
		{"missing bucket", "blob.bucket", func(o *Options) { o.Bucket = "no-such-bucket-" + o.Prefix[5:17] }},
		{"unknown access key", "blob.access_key_id", func(o *Options) { o.AccessKeyID = "NOSUCHKEY" }},
		{"wrong secret", "blob.secret_access_key", func(o *Options) { o.SecretAccessKey += "-wrong" }},
		{"nothing listening", "blob.endpoint", func(o *Options) { o.Endpoint = closed }},
		// No request leaves: the dialer refuses, as the name
		// <bucket>.<host> a virtual-hosted request needs would not resolve.
		{"virtual-hosted", "blob.path_style", func(o *Options) {
			o.Endpoint, o.PathStyle = "http://s3.invalid:9000", false
			o.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
				return nil, errors.New("no network in this test: " + addr)
			}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			s, err := Open(context.Background(), o)
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
			if o.SecretAccessKey != "" && strings.Contains(err.Error(), o.SecretAccessKey) {
				t.Fatalf("error %q shows the secret", err)
			}
		})
	}
}
