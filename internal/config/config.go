// Package config loads agentkernel's configuration: embedded defaults, then
// agentkernel.toml, then AGENTKERNEL_* environment variables, then flags,
// then Validate. Every key `[section] key` has the environment variable
// AGENTKERNEL_SECTION_KEY; top-level keys are AGENTKERNEL_LISTEN and
// AGENTKERNEL_HOME.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
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

	Store   StoreConfig   `toml:"store"`
	Blob    BlobConfig    `toml:"blob"`
	Server  ServerConfig  `toml:"server"`
	Log     LogConfig     `toml:"log"`
	Sandbox SandboxConfig `toml:"sandbox"`

	// Objects are the durable object classes of [[objects]] (file only).
	Objects []ObjectClassConfig `toml:"objects"`
	// DurableObjects tunes the object runtime. (It cannot be [objects]:
	// TOML does not allow a table and an array of tables with one name.)
	DurableObjects DurableObjectsConfig `toml:"durable_objects"`
	// Models maps model ids or prefixes to providers ([models."claude-*"]).
	Models map[string]ModelConfig `toml:"models"`
	// Prices are models' prices by id or prefix ([prices."claude-*"]),
	// over the built-in Claude list prices.
	Prices map[string]PriceConfig `toml:"prices"`
	// Monitor is the sandbox monitor of agent tasks (seed 001).
	Monitor MonitorConfig `toml:"monitor"`
	// Egress is the egress proxy.
	Egress EgressConfig `toml:"egress"`
	// Vault is where the keys that seal vault credentials live.
	Vault VaultConfig `toml:"vault"`
	// Files is the Files API (/v1/files).
	Files FilesConfig `toml:"files"`
	// Skills bounds skill uploads (/v1/skills).
	Skills SkillsConfig `toml:"skills"`
	// Packages is how environments' config.packages are built.
	Packages PackagesConfig `toml:"packages"`
	// Resources configures sessions' resources.
	Resources ResourcesConfig `toml:"resources"`
	// Webhooks is the delivery of events to tenants' endpoints.
	Webhooks WebhooksConfig `toml:"webhooks"`
	// WorkQueue is the work queue of self_hosted environments.
	WorkQueue WorkQueueConfig `toml:"work_queue"`
	// Cluster makes this daemon a node of several sharing one store.
	Cluster ClusterConfig `toml:"cluster"`
}

// PackagesConfig points the package managers of environment builds at the
// operator's indexes (a mirror, or a local index in tests). The hosts of
// these URLs are what a build sandbox may reach beside the public
// registries (egress.PackageManagerHosts).
type PackagesConfig struct {
	// PipIndexURL is pip's --index-url (a PEP 503 simple index).
	PipIndexURL string `toml:"pip_index_url"`
	// NpmRegistry is npm's --registry.
	NpmRegistry string `toml:"npm_registry"`
}

// SkillsConfig bounds what one skill upload may hold; 0 takes the
// default. An upload over any of them is refused with a 413 naming it.
type SkillsConfig struct {
	// MaxUploadBytes bounds the upload as sent (default 32 MiB).
	MaxUploadBytes int64 `toml:"max_upload_bytes"`
	// MaxFiles bounds the files in one skill (default 1000).
	MaxFiles int `toml:"max_files"`
	// MaxUnpackedBytes bounds a skill's files unpacked (default 64 MiB).
	MaxUnpackedBytes int64 `toml:"max_unpacked_bytes"`
	// MaxExpansionRatio bounds unpacked bytes per archive byte (default
	// 100): more is a compression bomb.
	MaxExpansionRatio int64 `toml:"max_expansion_ratio"`
}

// FilesConfig configures the Files API.
type FilesConfig struct {
	// MaxUploadBytes limits one uploaded file (413 beyond; default 500 MiB).
	MaxUploadBytes int64 `toml:"max_upload_bytes"`
}

// DefaultMaxUploadBytes is [files] max_upload_bytes when unset.
const DefaultMaxUploadBytes = 500 << 20

// VaultConfig configures the vault's key file.
type VaultConfig struct {
	// KeyFile holds the keys vault secrets are sealed with (default
	// $AGENTKERNEL_HOME/vault.keys, created 0600 on first start).
	KeyFile string `toml:"key_file"`
}

// SandboxConfig holds the sandbox layer's defaults; a sandbox's own fields
// (driver, image, limits, sleep_after, network) override them.
type SandboxConfig struct {
	// Driver is the default driver: "process" (bubblewrap) or "docker".
	Driver string `toml:"driver"`
	// Image is the default image for the process driver (a directory name
	// under images_dir; "" = the host's system directories, read-only).
	Image string `toml:"image"`
	// DockerImage is the default image of the docker driver.
	DockerImage string `toml:"docker_image"`
	// DockerHost is the Docker Engine address (default: DOCKER_HOST or the
	// local socket).
	DockerHost string   `toml:"docker_host"`
	SleepAfter Duration `toml:"sleep_after"`
	// BackgroundCap bounds a session's run_in_background command: it is
	// killed (and the model told) this long after it started, and a running
	// background process keeps its sandbox awake at most this long.
	BackgroundCap Duration `toml:"background_cap"`
	// Network is the sandboxes' network and the ceiling of what an
	// environment may allow: "egress" (the default: only loopback, and the
	// egress proxy, which lets out what the environment's networking
	// allows and nothing for a sandbox of no session), "none" (no way out
	// at all) or "host" (the host's network; implies allow_host_network).
	Network string `toml:"network"`
	// AllowHostNetwork lets a request or an environment ask for the host's
	// network, which reaches everything the host reaches (the daemon's API
	// on loopback included): the operator's decision, never a tenant's.
	// Network = "host" implies it.
	AllowHostNetwork bool `toml:"allow_host_network"`
	// MemoryMB, Pids and CPUs are every sandbox's limits unless its request
	// or its environment asks for others; there is no unlimited.
	MemoryMB int64   `toml:"memory_mb"`
	Pids     int64   `toml:"pids"`
	CPUs     float64 `toml:"cpus"`
	// MaxMemoryMB, MaxPids and MaxCPUs bound what a request or an
	// environment may ask for (CPUs also by the host's CPU count).
	MaxMemoryMB int64   `toml:"max_memory_mb"`
	MaxPids     int64   `toml:"max_pids"`
	MaxCPUs     float64 `toml:"max_cpus"`
	// GuestBinary is the static binary run as PID 1 in sandboxes; default:
	// this agentkernel executable (`agentkernel guest`).
	GuestBinary string `toml:"guest_binary"`
	// ImagesDir holds process-driver root filesystems; default $home/images.
	ImagesDir string `toml:"images_dir"`
	// RunDir holds guest sockets; default /tmp/agentkernel-<uid>/<hash of home>
	// (unix socket paths must stay short).
	RunDir       string   `toml:"run_dir"`
	BackupTTL    Duration `toml:"backup_ttl"`
	ReapInterval Duration `toml:"reap_interval"`
	// MaxFileBytes limits one file read or written through the files API.
	MaxFileBytes int64 `toml:"max_file_bytes"`
	// WarmPool is how many process-driver sandboxes wait started and
	// unassigned per shape (image, limits, network), so that a wake takes
	// one instead of starting bwrap and the guest; 0 turns the pool off.
	// The docker driver does not pool: its sandboxes always start fresh.
	WarmPool int `toml:"warm_pool"`
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
	// Engine is "fs" (default: files under Path) or "s3" (a bucket of an
	// S3-compatible store, which several daemons can share).
	Engine string `toml:"engine"`
	// Path is the blob root for the fs engine; default $home/blobs.
	Path string `toml:"path"`

	// The s3 engine (internal/blob/s3blob): the server's base URL, the
	// bucket (which must exist), its region (default us-east-1, or
	// AWS_REGION / AWS_DEFAULT_REGION), a prefix ("" or ending in "/") for
	// sharing a bucket, and path-style addressing (the bucket in the path;
	// most self-hosted servers need it). The credentials default to
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
	Endpoint        string `toml:"endpoint"`
	Bucket          string `toml:"bucket"`
	Region          string `toml:"region"`
	Prefix          string `toml:"prefix"`
	AccessKeyID     string `toml:"access_key_id"`
	SecretAccessKey string `toml:"secret_access_key"`
	SessionToken    string `toml:"session_token"`
	PathStyle       bool   `toml:"path_style"`

	// GCGrace is how old an unreferenced blob or a temp file (with s3: an
	// incomplete multipart upload) must be before the blob GC deletes it.
	// This daemon's own writes in flight are safe at any grace; it protects
	// writes of other processes sharing the blob store. With s3 the age is
	// the server's Last-Modified against this host's clock: keep the grace
	// well above any clock skew.
	GCGrace Duration `toml:"gc_grace"`
	// GCInterval is the time between blob GC passes (one runs at start).
	GCInterval Duration `toml:"gc_interval"`
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

// DefaultWarmPool is [sandbox] warm_pool's default: pooled sandboxes per
// shape. Off for now: a pooled sandbox's bwrap command line names its pool
// slot, not the sandbox it was assigned to, and tools (the crash tests
// among them) that find a sandbox's processes by "/<id>/workspace" in it
// do not find it.
const DefaultWarmPool = 0

// Default returns the embedded defaults: no file, no services.
func Default() Config {
	return Config{
		Listen: DefaultListen,
		Home:   DefaultHome(),
		Store:  StoreConfig{Engine: "sqlite"},
		Blob:   BlobConfig{Engine: "fs", GCGrace: Duration(time.Hour), GCInterval: Duration(time.Hour)},
		Server: ServerConfig{MaxBodyBytes: 2 << 20, ShutdownTimeout: Duration(30 * time.Second)},
		Log:    LogConfig{Level: "info", Format: "text"},
		Sandbox: SandboxConfig{
			Driver:       "process",
			DockerImage:  "agentkernel/sandbox:busybox",
			SleepAfter:   Duration(5 * time.Minute),
			Network:      sandbox.NetworkEgress,
			MemoryMB:     sandbox.DefaultMemoryMB,
			Pids:         sandbox.DefaultPids,
			CPUs:         sandbox.DefaultCPUs,
			MaxMemoryMB:  sandbox.DefaultMaxMemoryMB,
			MaxPids:      sandbox.DefaultMaxPids,
			MaxCPUs:      sandbox.DefaultMaxCPUs,
			BackupTTL:    Duration(7 * 24 * time.Hour),
			ReapInterval: Duration(10 * time.Second),
			MaxFileBytes: 64 << 20,
			WarmPool:     DefaultWarmPool,
			// 30m, as tools.DefaultBackgroundCap.
			BackgroundCap: Duration(sandbox.DefaultBackgroundCap),
		},
		DurableObjects: DefaultDurableObjects(),
		Monitor:        DefaultMonitor(),
		Webhooks:       DefaultWebhooks(),
		WorkQueue:      DefaultWorkQueue(),
		Cluster:        DefaultCluster(),
		Files:          FilesConfig{MaxUploadBytes: DefaultMaxUploadBytes},
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

// ImagesDir is the process driver's image root after defaults.
func (c *Config) ImagesDir() string {
	if c.Sandbox.ImagesDir != "" {
		return c.Sandbox.ImagesDir
	}
	return filepath.Join(c.Home, "images")
}

// PackagesDir holds the built package layers of environments.
func (c *Config) PackagesDir() string { return filepath.Join(c.Home, "packages") }

// SandboxDataDir holds each sandbox's host workspace.
func (c *Config) SandboxDataDir() string { return filepath.Join(c.Home, "sandboxes") }

// SandboxRunDir is where guest sockets live, kept short for the 107-byte
// unix socket path limit and distinct per home.
func (c *Config) SandboxRunDir() string {
	if c.Sandbox.RunDir != "" {
		return c.Sandbox.RunDir
	}
	h := sha256.Sum256([]byte(c.Home))
	return filepath.Join(os.TempDir(), fmt.Sprintf("agentkernel-%d", os.Getuid()), hex.EncodeToString(h[:])[:10])
}

// HostNetworkAllowed says whether sandboxes may share the host's network:
// allow_host_network, or host as the default network.
func (c *Config) HostNetworkAllowed() bool {
	return c.Sandbox.AllowHostNetwork || c.Sandbox.Network == sandbox.NetworkHost
}

// SandboxLimits is the [sandbox] limit policy: defaults and maximums.
func (c *Config) SandboxLimits() sandbox.LimitPolicy {
	sb := c.Sandbox
	return sandbox.LimitPolicy{
		Default: sandbox.Limits{MemoryMB: sb.MemoryMB, Pids: sb.Pids, CPUs: sb.CPUs},
		Max:     sandbox.Limits{MemoryMB: sb.MaxMemoryMB, Pids: sb.MaxPids, CPUs: sb.MaxCPUs},
	}
}

// VaultKeyFile is the vault's key file after defaults are applied.
func (c *Config) VaultKeyFile() string {
	if c.Vault.KeyFile != "" {
		return c.Vault.KeyFile
	}
	return filepath.Join(c.Home, "vault.keys")
}

// AdminKeyPath is where serve writes the admin key on first start.
func (c *Config) AdminKeyPath() string { return filepath.Join(c.Home, "admin.key") }
