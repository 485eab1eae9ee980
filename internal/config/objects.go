package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"time"
)

// ObjectClassConfig is one [[objects]] entry (seed 002 plus agentkernel's
// driver, max_concurrency, storage_mode and app_dir).
type ObjectClassConfig struct {
	Class              string   `toml:"class"`
	Image              string   `toml:"image"`
	Driver             string   `toml:"driver"`
	IdleTimeoutSeconds int64    `toml:"idle_timeout_seconds"`
	InitCommand        []string `toml:"init_command"`
	MaxConcurrency     int64    `toml:"max_concurrency"`
	StorageMode        string   `toml:"storage_mode"` // "snapshot" (default) or "write-through"
	// AppDir is a host directory mounted read-only at /app. Only
	// [[objects]] may name one, and only under durable_objects.app_roots;
	// classes defined through the API upload a bundle instead.
	AppDir string            `toml:"app_dir"`
	Env    map[string]string `toml:"env"`
	// Isolation is "object" (default: a sandbox per object) or "class":
	// the objects of one tenant and this class share sandboxes, one server
	// process serving up to ObjectsPerSandbox of them (default 1000).
	Isolation         string `toml:"isolation"`
	ObjectsPerSandbox int64  `toml:"objects_per_sandbox"`
}

// Object isolation modes and the bounds of objects_per_sandbox.
const (
	IsolationObject          = "object"
	IsolationClass           = "class"
	DefaultObjectsPerSandbox = 1000
	MaxObjectsPerSandbox     = 10000
)

// DurableObjectsConfig holds the object runtime's limits and intervals
// (seed 002's values by default).
type DurableObjectsConfig struct {
	AlarmPollInterval Duration `toml:"alarm_poll_interval"`
	IdleCheckInterval Duration `toml:"idle_check_interval"`
	MaxKeys           int64    `toml:"max_keys"`
	MaxValueBytes     int64    `toml:"max_value_bytes"`
	MaxStorageBytes   int64    `toml:"max_storage_bytes"`
	MaxActiveObjects  int64    `toml:"max_active_objects"`
	MaxAlarms         int64    `toml:"max_alarms"`
	CallTimeout       Duration `toml:"call_timeout"`
	DumpTimeout       Duration `toml:"dump_timeout"`

	// AppRoots are the host directories an [[objects]] app_dir must lie
	// under (after symlinks and ".." are resolved). Default: the directory
	// holding the agentkernel.toml that was loaded; [] allows none.
	AppRoots []string `toml:"app_roots"`
	// MaxBundleBytes bounds an uploaded bundle as sent (413 beyond);
	// MaxBundleUnpackedBytes and MaxBundleFiles bound what it unpacks to.
	MaxBundleBytes         int64 `toml:"max_bundle_bytes"`
	MaxBundleUnpackedBytes int64 `toml:"max_bundle_unpacked_bytes"`
	MaxBundleFiles         int64 `toml:"max_bundle_files"`
}

// DefaultDurableObjects returns seed 002's constants.
func DefaultDurableObjects() DurableObjectsConfig {
	return DurableObjectsConfig{
		AlarmPollInterval: Duration(30 * time.Second),
		IdleCheckInterval: Duration(5 * time.Second),
		MaxKeys:           10000,
		MaxValueBytes:     1 << 20,
		MaxStorageBytes:   50 << 20,
		MaxActiveObjects:  200,
		MaxAlarms:         100,
		CallTimeout:       Duration(30 * time.Second),
		DumpTimeout:       Duration(10 * time.Second),

		MaxBundleBytes:         64 << 20,
		MaxBundleUnpackedBytes: 256 << 20,
		MaxBundleFiles:         20000,
	}
}

// validateObjects checks [[objects]] and [durable_objects].
func (c *Config) validateObjects() []error {
	var errs []error
	seen := map[string]bool{}
	for i, o := range c.Objects {
		f := func(k string) string { return fmt.Sprintf("objects[%d].%s", i, k) }
		if !classNameRE.MatchString(o.Class) {
			errs = append(errs, &FieldError{Field: f("class"), Value: o.Class, Accepted: "1-63 of a-z, 0-9, '-', '_', starting with a letter or digit"})
		} else if seen[o.Class] {
			errs = append(errs, &FieldError{Field: f("class"), Value: o.Class, Reason: "declared twice"})
		}
		seen[o.Class] = true
		switch o.Driver {
		case "", "process", "docker":
		default:
			errs = append(errs, &FieldError{Field: f("driver"), Value: o.Driver, Accepted: `"process" or "docker"`})
		}
		switch o.StorageMode {
		case "", "snapshot", "write-through":
		default:
			errs = append(errs, &FieldError{Field: f("storage_mode"), Value: o.StorageMode, Accepted: `"snapshot" or "write-through"`})
		}
		switch o.Isolation {
		case "", IsolationObject, IsolationClass:
		default:
			errs = append(errs, &FieldError{Field: f("isolation"), Value: o.Isolation, Accepted: `"object" or "class"`})
		}
		switch {
		case o.ObjectsPerSandbox < 0 || o.ObjectsPerSandbox > MaxObjectsPerSandbox:
			errs = append(errs, &FieldError{Field: f("objects_per_sandbox"), Value: fmt.Sprint(o.ObjectsPerSandbox), Accepted: fmt.Sprintf("0 (default %d) to %d", DefaultObjectsPerSandbox, MaxObjectsPerSandbox)})
		case o.ObjectsPerSandbox > 0 && o.Isolation != IsolationClass:
			errs = append(errs, &FieldError{Field: f("objects_per_sandbox"), Value: fmt.Sprint(o.ObjectsPerSandbox), Reason: `only a class with isolation = "class" shares sandboxes`, Accepted: `isolation = "class", or no objects_per_sandbox`})
		}
		if o.IdleTimeoutSeconds < 0 {
			errs = append(errs, &FieldError{Field: f("idle_timeout_seconds"), Value: fmt.Sprint(o.IdleTimeoutSeconds), Accepted: "0 (default 300) or more"})
		}
		if o.MaxConcurrency < 0 {
			errs = append(errs, &FieldError{Field: f("max_concurrency"), Value: fmt.Sprint(o.MaxConcurrency), Accepted: "0 (default 1) or more"})
		}
		if len(o.InitCommand) == 0 {
			errs = append(errs, &FieldError{Field: f("init_command"), Reason: "required: the command that starts the object's server on 127.0.0.1:9333", Accepted: `e.g. ["node", "/app/counter.js"]`})
		}
		if o.AppDir != "" && !filepath.IsAbs(o.AppDir) {
			errs = append(errs, &FieldError{Field: f("app_dir"), Value: o.AppDir, Accepted: "an absolute host directory"})
		}
	}
	d := c.DurableObjects
	positive := map[string]int64{
		"durable_objects.max_keys": d.MaxKeys, "durable_objects.max_value_bytes": d.MaxValueBytes,
		"durable_objects.max_storage_bytes": d.MaxStorageBytes, "durable_objects.max_active_objects": d.MaxActiveObjects,
		"durable_objects.max_alarms": d.MaxAlarms, "durable_objects.max_bundle_bytes": d.MaxBundleBytes,
		"durable_objects.max_bundle_unpacked_bytes": d.MaxBundleUnpackedBytes, "durable_objects.max_bundle_files": d.MaxBundleFiles,
	}
	for k, v := range positive {
		if v < 1 {
			errs = append(errs, &FieldError{Field: k, Value: fmt.Sprint(v), Accepted: "a positive number"})
		}
	}
	for i, r := range d.AppRoots {
		if !filepath.IsAbs(r) {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("durable_objects.app_roots[%d]", i), Value: r, Accepted: "an absolute host directory"})
		}
	}
	durations := map[string]Duration{
		"durable_objects.alarm_poll_interval": d.AlarmPollInterval, "durable_objects.idle_check_interval": d.IdleCheckInterval,
		"durable_objects.call_timeout": d.CallTimeout, "durable_objects.dump_timeout": d.DumpTimeout,
	}
	for k, v := range durations {
		if v.D() < 10*time.Millisecond {
			errs = append(errs, &FieldError{Field: k, Value: v.D().String(), Accepted: "a duration of at least 10ms"})
		}
	}
	return errs
}

var classNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
