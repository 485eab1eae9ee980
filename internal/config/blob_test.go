package config

import (
	"path/filepath"
	"strings"
	"testing"
)

const s3File = `[blob]
engine = "s3"
endpoint = "http://127.0.0.1:7070"
bucket = "agentkernel"
prefix = "prod/"
path_style = true
`

// TestBlobS3FromFileAndAWSEnv: the s3 engine's keys come from the file or
// AGENTKERNEL_BLOB_*, its credentials and region default to the AWS SDKs'
// variables, and the session token only comes along with its key pair.
func TestBlobS3FromFileAndAWSEnv(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	p := filepath.Join(t.TempDir(), "c.toml")
	writeFile(t, p, s3File)
	aws := []string{"AGENTKERNEL_HOME=" + home, "AWS_ACCESS_KEY_ID=AKIDENV", "AWS_SECRET_ACCESS_KEY=envsecret",
		"AWS_SESSION_TOKEN=envtoken", "AWS_DEFAULT_REGION=eu-west-3"}
	cfg, _, err := Load(Flags{ConfigPath: p}, aws)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Blob
	if b.Engine != "s3" || b.Endpoint != "http://127.0.0.1:7070" || b.Bucket != "agentkernel" || b.Prefix != "prod/" || !b.PathStyle ||
		b.AccessKeyID != "AKIDENV" || b.SecretAccessKey != "envsecret" || b.SessionToken != "envtoken" || b.Region != "eu-west-3" {
		t.Fatalf("blob config from file + AWS env = %+v", b)
	}
	// AGENTKERNEL_BLOB_* win, and a key pair given there leaves the AWS
	// session token (which belongs to another pair) alone.
	cfg, _, err = Load(Flags{ConfigPath: p}, append(aws, "AGENTKERNEL_BLOB_ACCESS_KEY_ID=AKIDAK",
		"AGENTKERNEL_BLOB_SECRET_ACCESS_KEY=aksecret", "AGENTKERNEL_BLOB_REGION=us-west-2", "AGENTKERNEL_BLOB_PATH_STYLE=false"))
	if err != nil {
		t.Fatal(err)
	}
	b = cfg.Blob
	if b.AccessKeyID != "AKIDAK" || b.SecretAccessKey != "aksecret" || b.SessionToken != "" || b.Region != "us-west-2" || b.PathStyle {
		t.Fatalf("blob config with AGENTKERNEL_BLOB_* = %+v", b)
	}
	// The AWS variables do nothing for the fs engine.
	cfg, _, err = Load(Flags{}, aws)
	if err != nil || cfg.Blob.AccessKeyID != "" || cfg.Blob.Region != "" {
		t.Fatalf("fs engine with AWS env: %+v, %v", cfg.Blob, err)
	}
}

// TestBlobS3Refusals: a missing or malformed s3 key, or a key of the other
// engine, is refused with an error naming it.
func TestBlobS3Refusals(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	creds := []string{"AGENTKERNEL_BLOB_ACCESS_KEY_ID=k", "AGENTKERNEL_BLOB_SECRET_ACCESS_KEY=s"}
	for _, c := range []struct {
		file string
		env  []string
		want []string
	}{
		{env: []string{"AGENTKERNEL_BLOB_ENGINE=gcs"}, want: []string{"blob.engine", `"fs" or "s3"`}},
		{file: s3File, want: []string{"blob.access_key_id", "blob.secret_access_key", "AWS_ACCESS_KEY_ID"}},
		{file: s3File, env: []string{"AGENTKERNEL_BLOB_ACCESS_KEY_ID=k"}, want: []string{"blob.secret_access_key"}},
		{file: s3File, env: append(creds, "AGENTKERNEL_BLOB_PATH=/srv/blobs"), want: []string{"blob.path", `only used by blob.engine = "fs"`}},
		{file: strings.Replace(s3File, `endpoint = "http://127.0.0.1:7070"`, "", 1), env: creds, want: []string{"blob.endpoint", "required"}},
		{file: strings.Replace(s3File, "http://127.0.0.1:7070", "s3.example.com", 1), env: creds, want: []string{"blob.endpoint", "not an http or https URL"}},
		{file: strings.Replace(s3File, `bucket = "agentkernel"`, `bucket = "My_Bucket"`, 1), env: creds, want: []string{"blob.bucket", "lowercase"}},
		{file: strings.Replace(s3File, `bucket = "agentkernel"`, "", 1), env: creds, want: []string{"blob.bucket", "required"}},
		{file: strings.Replace(s3File, `"prod/"`, `"../prod/"`, 1), env: creds, want: []string{"blob.prefix", ".."}},
		{file: strings.Replace(s3File, `"prod/"`, `"prod"`, 1), env: creds, want: []string{"blob.prefix", "must end with /"}},
		{env: []string{"AGENTKERNEL_BLOB_BUCKET=agentkernel"}, want: []string{"blob.bucket", `only used by blob.engine = "s3"`}},
		{env: []string{"AGENTKERNEL_BLOB_PATH_STYLE=true"}, want: []string{"blob.path_style", `only used by blob.engine = "s3"`}},
	} {
		var flags Flags
		if c.file != "" {
			flags.ConfigPath = filepath.Join(t.TempDir(), "c.toml")
			writeFile(t, flags.ConfigPath, c.file)
		}
		_, _, err := Load(flags, append([]string{"AGENTKERNEL_HOME=" + home}, c.env...))
		if err == nil {
			t.Errorf("%v %q: no error", c.env, c.file)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %q: error %q does not mention %q", c.env, c.file, err, w)
			}
		}
	}
}
