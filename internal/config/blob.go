package config

import (
	"strings"

	"github.com/agentkernel/agentkernel/internal/blob/s3blob"
)

// validateBlob checks [blob]: each engine's own keys, and none of the other
// engine's, which would otherwise be accepted and ignored.
func (c *Config) validateBlob() []error {
	b := c.Blob
	var errs []error
	add := func(e *FieldError) { errs = append(errs, e) }
	s3Only := []struct {
		field string
		set   bool
	}{
		{"blob.endpoint", b.Endpoint != ""}, {"blob.bucket", b.Bucket != ""}, {"blob.region", b.Region != ""},
		{"blob.prefix", b.Prefix != ""}, {"blob.access_key_id", b.AccessKeyID != ""},
		{"blob.secret_access_key", b.SecretAccessKey != ""}, {"blob.session_token", b.SessionToken != ""},
		{"blob.path_style", b.PathStyle},
	}
	switch b.Engine {
	case "fs":
		for _, f := range s3Only {
			if f.set {
				add(&FieldError{Field: f.field, Reason: `only used by blob.engine = "s3" (blob.engine is "fs")`})
			}
		}
	case "s3":
		if b.Path != "" {
			add(&FieldError{Field: "blob.path", Value: b.Path, Reason: `only used by blob.engine = "fs" (blob.engine is "s3")`})
		}
		if err := s3blob.CheckEndpoint(b.Endpoint); err != nil {
			add(&FieldError{Field: "blob.endpoint", Reason: err.Error(), Accepted: "the server's http(s) base URL"})
		}
		if err := s3blob.CheckBucketName(b.Bucket); err != nil {
			add(&FieldError{Field: "blob.bucket", Reason: err.Error(), Accepted: "an existing bucket's name"})
		}
		if err := s3blob.CheckPrefix(b.Prefix); err != nil {
			add(&FieldError{Field: "blob.prefix", Reason: err.Error(), Accepted: `"" or key segments ending in "/", e.g. "agentkernel/"`})
		}
		if strings.TrimSpace(b.Region) != b.Region {
			add(&FieldError{Field: "blob.region", Value: b.Region, Reason: "has surrounding spaces"})
		}
		if b.AccessKeyID == "" {
			add(&FieldError{Field: "blob.access_key_id", Reason: `required when blob.engine = "s3"`, Accepted: "an access key id, here or in AWS_ACCESS_KEY_ID"})
		}
		if b.SecretAccessKey == "" {
			add(&FieldError{Field: "blob.secret_access_key", Reason: `required when blob.engine = "s3"`, Accepted: "the key's secret, here or in AWS_SECRET_ACCESS_KEY"})
		}
	default:
		add(&FieldError{Field: "blob.engine", Value: b.Engine, Accepted: `"fs" or "s3"`, Reason: "unknown engine"})
	}
	return errs
}

// applyAWSEnv fills the s3 engine's credentials and region that neither
// the file nor AGENTKERNEL_BLOB_* set from the AWS SDKs' standard
// variables. The session token only comes along with the key pair it
// belongs to.
func applyAWSEnv(cfg *Config, environ []string) {
	b := &cfg.Blob
	if b.Engine != "s3" {
		return
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "AWS_") {
			env[k] = v
		}
	}
	if b.AccessKeyID == "" && b.SecretAccessKey == "" && b.SessionToken == "" {
		b.AccessKeyID, b.SecretAccessKey, b.SessionToken = env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"]
	}
	if b.Region == "" {
		b.Region = env["AWS_REGION"]
		if b.Region == "" {
			b.Region = env["AWS_DEFAULT_REGION"]
		}
	}
}
