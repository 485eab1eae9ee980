package testenv

import (
	"fmt"
	"os"
	"testing"
)

// The S3-compatible server the S3 blob engine's tests use. scripts/test.sh
// starts one (scripts/s3dev.sh start does the same for a developer) and sets
// all of these; only the endpoint is required, the others have defaults.
const (
	S3EndpointEnv  = "AGENTKERNEL_TEST_S3_ENDPOINT"
	S3AccessKeyEnv = "AGENTKERNEL_TEST_S3_ACCESS_KEY_ID"
	S3SecretKeyEnv = "AGENTKERNEL_TEST_S3_SECRET_ACCESS_KEY"
	S3BucketEnv    = "AGENTKERNEL_TEST_S3_BUCKET"
	S3RegionEnv    = "AGENTKERNEL_TEST_S3_REGION"
)

// S3Server is the test S3 server: path-style addressing, one bucket the
// tests share (each test works under a prefix of its own).
type S3Server struct {
	Endpoint        string
	AccessKeyID     string
	SecretAccessKey string
	Bucket          string
	Region          string
}

// S3 returns the test S3 server, or ends t through Unavailable when
// AGENTKERNEL_TEST_S3_ENDPOINT is not set.
func S3(t testing.TB) S3Server {
	t.Helper()
	srv := S3Server{
		Endpoint:        os.Getenv(S3EndpointEnv),
		AccessKeyID:     os.Getenv(S3AccessKeyEnv),
		SecretAccessKey: os.Getenv(S3SecretKeyEnv),
		Bucket:          os.Getenv(S3BucketEnv),
		Region:          os.Getenv(S3RegionEnv),
	}
	if srv.Endpoint == "" {
		Unavailable(t, "an S3-compatible server", S3EndpointEnv+" is not set; run scripts/test.sh, which starts one, "+
			"or `eval \"$(scripts/s3dev.sh start)\"` for a developer's server")
	}
	if srv.Bucket == "" {
		srv.Bucket = "agentkernel-test"
	}
	if srv.Region == "" {
		srv.Region = "us-east-1"
	}
	return srv
}

// SharedStoresTOML is the configuration of a daemon on the PostgreSQL
// database at pgURL and this S3 server under prefix: the stores several
// daemons of a test cluster share.
func (s S3Server) SharedStoresTOML(pgURL, prefix string) string {
	return fmt.Sprintf(`
[store]
engine = "postgres"
url = %q

[blob]
engine = "s3"
endpoint = %q
bucket = %q
region = %q
prefix = %q
access_key_id = %q
secret_access_key = %q
path_style = true
`, pgURL, s.Endpoint, s.Bucket, s.Region, prefix, s.AccessKeyID, s.SecretAccessKey)
}
