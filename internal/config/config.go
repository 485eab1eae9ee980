// Package config loads agentkernel's configuration: embedded defaults, then
// agentkernel.toml, then AGENTKERNEL_* environment variables, then flags,
// then Validate. Every key `[section] key` has the environment variable
// AGENTKERNEL_SECTION_KEY; top-level keys are AGENTKERNEL_LISTEN and
// AGENTKERNEL_HOME.
package config

import (
	"os"
	"path/filepath"
	"time"
)

// FileName is the configuration file looked up in the working directory and
// then in the home directory.
const FileName = "agentkernel.toml"

// DefaultListen is the embedded default listen address.
const DefaultListen = "127.0.0.1:18888"

// Config is the whole configuration. Field tags name the TOML keys; the same
// names, upper-cased and joined with "_", form the environment variables.
type Config struct {
	Listen string `toml:"listen"`
	Home   string `toml:"home"`

	Store  StoreConfig  `toml:"store"`
	Blob   BlobConfig   `toml:"blob"`
	Server ServerConfig `toml:"server"`
	Log    LogConfig    `toml:"log"`
}

// StoreConfig selects the state store.
type StoreConfig struct {
	// Engine is "sqlite" (default, $home/state.db) or "postgres".
	Engine string `toml:"engine"`
	// Path is the SQLite database file; default $home/state.db.
	Path string `toml:"path"`
	// URL is the PostgreSQL connection URL (engine = "postgres").
	URL string `toml:"url"`
}

// BlobConfig selects the blob store.
type BlobConfig struct {
	// Engine is "fs" (default).
	Engine string `toml:"engine"`
	// Path is the blob root for the fs engine; default $home/blobs.
	Path string `toml:"path"`
}

// ServerConfig tunes the HTTP server.
type ServerConfig struct {
	// MaxBodyBytes limits request bodies (413 beyond it).
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// ShutdownTimeout bounds how long in-flight requests may take to finish
	// on SIGINT/SIGTERM.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
}

// LogConfig tunes slog output.
type LogConfig struct {
	Level  string `toml:"level"`  // debug|info|warn|error
	Format string `toml:"format"` // text|json
}

// Default returns the embedded defaults: no file, no services.
func Default() Config {
	return Config{
		Listen: DefaultListen,
		Home:   DefaultHome(),
		Store:  StoreConfig{Engine: "sqlite"},
		Blob:   BlobConfig{Engine: "fs"},
		Server: ServerConfig{MaxBodyBytes: 1 << 20, ShutdownTimeout: Duration(30 * time.Second)},
		Log:    LogConfig{Level: "info", Format: "text"},
	}
}

// DefaultHome is $AGENTKERNEL_HOME or ~/.local/share/agentkernel.
func DefaultHome() string {
	if h := os.Getenv("AGENTKERNEL_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "agentkernel")
	}
	return filepath.Join(os.TempDir(), "agentkernel")
}

// StatePath is the SQLite database path after defaults are applied.
func (c *Config) StatePath() string {
	if c.Store.Path != "" {
		return c.Store.Path
	}
	return filepath.Join(c.Home, "state.db")
}

// BlobPath is the fs blob root after defaults are applied.
func (c *Config) BlobPath() string {
	if c.Blob.Path != "" {
		return c.Blob.Path
	}
	return filepath.Join(c.Home, "blobs")
}

// AdminKeyPath is where serve writes the admin key on first start.
func (c *Config) AdminKeyPath() string { return filepath.Join(c.Home, "admin.key") }
