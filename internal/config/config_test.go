package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultsWithNoFileNoEnv(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	cfg, src, err := Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil {
		t.Fatal(err)
	}
	if src.File != "" {
		t.Fatalf("found a config file %q in an empty dir", src.File)
	}
	if cfg.Listen != DefaultListen || cfg.Store.Engine != "sqlite" || cfg.Blob.Engine != "fs" {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if cfg.StatePath() != filepath.Join(home, "state.db") || cfg.BlobPath() != filepath.Join(home, "blobs") {
		t.Fatalf("paths: %s %s", cfg.StatePath(), cfg.BlobPath())
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	writeFile(t, filepath.Join(home, FileName), `
listen = "127.0.0.1:1111"
[server]
max_body_bytes = 4096
shutdown_timeout = "5s"
[log]
level = "debug"
`)
	// File only (found in $home).
	cfg, src, err := Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil {
		t.Fatal(err)
	}
	if src.File == "" || cfg.Listen != "127.0.0.1:1111" || cfg.Server.MaxBodyBytes != 4096 ||
		cfg.Server.ShutdownTimeout.D() != 5*time.Second || cfg.Log.Level != "debug" {
		t.Fatalf("file not applied: %+v", cfg)
	}
	// Env beats file.
	env := []string{"AGENTKERNEL_HOME=" + home, "AGENTKERNEL_LISTEN=127.0.0.1:2222", "AGENTKERNEL_SERVER_MAX_BODY_BYTES=8192", "AGENTKERNEL_LOG_LEVEL=warn"}
	cfg, _, err = Load(Flags{}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:2222" || cfg.Server.MaxBodyBytes != 8192 || cfg.Log.Level != "warn" {
		t.Fatalf("env not applied: %+v", cfg)
	}
	// Flags beat env.
	cfg, _, err = Load(Flags{Listen: "127.0.0.1:3333"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:3333" {
		t.Fatalf("flag not applied: %s", cfg.Listen)
	}
}

func TestWorkingDirFileWinsOverHomeFile(t *testing.T) {
	home := t.TempDir()
	wd := t.TempDir()
	t.Chdir(wd)
	writeFile(t, filepath.Join(home, FileName), `listen = "127.0.0.1:1111"`)
	writeFile(t, filepath.Join(wd, FileName), `listen = "127.0.0.1:4444"`)
	cfg, _, err := Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:4444" {
		t.Fatalf("listen = %s", cfg.Listen)
	}
}

func TestValidationNamesTheField(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	cases := []struct {
		env  []string
		file string
		want []string
	}{
		{env: []string{"AGENTKERNEL_STORE_ENGINE=mysql"}, want: []string{"store.engine", `"sqlite" or "postgres"`}},
		{env: []string{"AGENTKERNEL_STORE_ENGINE=postgres"}, want: []string{"store.url"}},
		{env: []string{"AGENTKERNEL_LISTEN=nonsense"}, want: []string{"listen", "host:port"}},
		{env: []string{"AGENTKERNEL_SERVER_MAX_BODY_BYTES=abc"}, want: []string{"server.max_body_bytes", "AGENTKERNEL_SERVER_MAX_BODY_BYTES", "integer"}},
		{env: []string{"AGENTKERNEL_SERVER_SHUTDOWN_TIMEOUT=soon"}, want: []string{"server.shutdown_timeout", "duration"}},
		{env: []string{"AGENTKERNEL_LOG_LEVEL=loud"}, want: []string{"log.level", `"debug"`}},
		{env: []string{"AGENTKERNEL_BLOB_GC_GRACE=-1m"}, want: []string{"blob.gc_grace", "non-negative"}},
		{env: []string{"AGENTKERNEL_BLOB_GC_INTERVAL=10ms"}, want: []string{"blob.gc_interval", "at least 1s"}},
		{env: []string{"AGENTKERNEL_SANDBOX_BACKGROUND_CAP=0s"}, want: []string{"sandbox.background_cap", "positive duration"}},
		{file: "[store]\nengin = \"x\"\n", want: []string{"unknown key", "store.engin"}},
		{file: "listen = \n", want: []string{"line 1"}},
		{file: "[resources]\ngit_internal_hosts = [\"git.internal\", \"http://10.0.0.5/\"]\n", want: []string{"resources.git_internal_hosts[1]", "not a host"}},
		{file: "[models.\"gw-*\"]\nprovider = \"openai\"\nidempotency_header = \"Idempotency Key\"\n", want: []string{`models."gw-*".idempotency_header`, "not an HTTP header name"}},
		{file: "[models.\"gw-*\"]\nprovider = \"anthropic\"\nidempotency_header = \"x-api-key\"\n", want: []string{`models."gw-*".idempotency_header`, "sets itself"}},
		{file: "[models.\"s\"]\nprovider = \"scripted\"\nfile = \"t.yaml\"\nidempotency_header = \"Idempotency-Key\"\n", want: []string{`models."s".idempotency_header`, "no HTTP request"}},
		{file: "[models.\"c-*\"]\nprovider = \"anthropic\"\ncontext_window = -5\n", want: []string{`models."c-*".context_window`, "negative"}},
		{file: "[models.\"c-*\"]\nprovider = \"anthropic\"\ncontext_window = 4000\nmax_tokens = 8000\n", want: []string{`models."c-*".context_window`, "more tokens than max_tokens"}},
		{file: "[models.\"c-*\"]\nprovider = \"anthropic\"\ncompact_at = 1.5\n", want: []string{`models."c-*".compact_at`, "0.1 to 1"}},
		{file: "[prices.\"c-*\"]\ninput_per_mtok = 3\noutput_per_mtok = -15\n", want: []string{`prices."c-*".output_per_mtok = "-15"`, "not a price"}},
		{file: "[prices.\"c-*\"]\ninput_per_mtok = 3\noutput_per_mtok = 15\ncache_write_per_mtok = -0.5\n", want: []string{`prices."c-*".cache_write_per_mtok = "-0.5"`, "0 or more"}},
		{file: "[prices.\"c-*\"]\ninput_per_mtok = 3\noutput_per_mtok = 15\ncache_read_per_mtok = nan\n", want: []string{`prices."c-*".cache_read_per_mtok`, "not a price"}},
		{file: "[prices.\"c-*\"]\ninput_per_mtok = 3\n", want: []string{`prices."c-*".output_per_mtok`, "required"}},
		{file: "[prices.\"*-mini\"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n", want: []string{`prices."*-mini"`, "bad pattern"}},
		{file: "[prices.\"c-*\"]\ninput_per_mtok = 3\noutput_per_mtok = 15\ncache_write_1h_per_mtok = 6\n", want: []string{"unknown key", "cache_write_1h_per_mtok"}},
	}
	for _, c := range cases {
		var flags Flags
		if c.file != "" {
			p := filepath.Join(t.TempDir(), "c.toml")
			writeFile(t, p, c.file)
			flags.ConfigPath = p
		}
		_, _, err := Load(flags, append([]string{"AGENTKERNEL_HOME=" + home}, c.env...))
		if err == nil {
			t.Fatalf("%v %q: no error", c.env, c.file)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %q: error %q does not mention %q", c.env, c.file, err, w)
			}
		}
	}
	var fe *FieldError
	_, _, err := Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home, "AGENTKERNEL_LOG_FORMAT=xml"})
	if !errors.As(err, &fe) || fe.Field != "log.format" {
		t.Fatalf("want FieldError for log.format, got %v", err)
	}
}

func TestMissingExplicitConfig(t *testing.T) {
	_, _, err := Load(Flags{ConfigPath: filepath.Join(t.TempDir(), "nope.toml")}, nil)
	if err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("err = %v", err)
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPricesReadAsWritten: integers and decimals both read as prices, and
// omitted cache prices are Anthropic's multiples of the input price.
func TestPricesReadAsWritten(t *testing.T) {
	t.Chdir(t.TempDir())
	p := filepath.Join(t.TempDir(), "c.toml")
	writeFile(t, p, "[prices.\"house-*\"]\ninput_per_mtok = 2\noutput_per_mtok = 8.5\n"+
		"[prices.\"house-large\"]\ninput_per_mtok = 4\noutput_per_mtok = 16\ncache_read_per_mtok = 0\ncache_write_per_mtok = 4\n")
	cfg, _, err := Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	type rates struct{ in, out, read, write float64 }
	for pattern, want := range map[string]rates{"house-*": {2, 8.5, 0.2, 2.5}, "house-large": {4, 16, 0, 4}} {
		var got rates
		got.in, got.out, got.read, got.write = cfg.Prices[pattern].Rates()
		if got != want {
			t.Errorf("%s: %+v, want %+v", pattern, got, want)
		}
	}
}
