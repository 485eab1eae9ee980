package config

import (
	"encoding"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// EnvPrefix starts every environment variable that sets a config key.
const EnvPrefix = "AGENTKERNEL_"

// Flags are the command-line overrides; empty means "not given".
type Flags struct {
	ConfigPath string // --config
	Listen     string // --listen
	Home       string // --home
}

// Source says where a loaded configuration came from, for logs.
type Source struct {
	File string // "" when no file was found
}

// Load builds the configuration: defaults < file < environment < flags, then
// validates it. environ is os.Environ()-shaped.
func Load(flags Flags, environ []string) (Config, Source, error) {
	env := envMap(environ)
	cfg := Default()
	if h := env[EnvPrefix+"HOME"]; h != "" {
		cfg.Home = h
	}
	if flags.Home != "" {
		cfg.Home = flags.Home
	}

	path, err := findFile(flags.ConfigPath, cfg.Home)
	if err != nil {
		return cfg, Source{}, err
	}
	src := Source{File: path}
	if path != "" {
		if err := decodeFile(path, &cfg); err != nil {
			return cfg, src, err
		}
		defaultAppRoots(&cfg, path)
	}
	if err := applyEnv(&cfg, env); err != nil {
		return cfg, src, err
	}
	applyAWSEnv(&cfg, environ)
	if flags.Listen != "" {
		cfg.Listen = flags.Listen
	}
	if flags.Home != "" {
		cfg.Home = flags.Home
	}
	if err := cfg.Validate(); err != nil {
		return cfg, src, err
	}
	return cfg, src, nil
}

// defaultAppRoots lets [[objects]] app_dir name directories beside the
// configuration file that declares them (the README's `object init`
// walkthrough) unless the file says otherwise; with no file there are no
// [[objects]] and no roots.
func defaultAppRoots(cfg *Config, path string) {
	if cfg.DurableObjects.AppRoots != nil {
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		cfg.DurableObjects.AppRoots = []string{filepath.Dir(abs)}
	}
}

// findFile: --config must exist; otherwise ./agentkernel.toml, then
// $home/agentkernel.toml, else none.
func findFile(explicit, home string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("config: --config %s: %w", explicit, err)
		}
		return explicit, nil
	}
	for _, p := range []string{FileName, filepath.Join(home, FileName)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("config: %s: %w", p, err)
		}
	}
	return "", nil
}

func decodeFile(path string, cfg *Config) error {
	md, err := toml.DecodeFile(path, cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("config: %s: line %d: %s", path, pe.Position.Line, pe.Message)
		}
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("config: %s: unknown key(s) %s", path, strings.Join(keys, ", "))
	}
	return nil
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			m[k] = v
		}
	}
	return m
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// applyEnv walks the struct: top-level scalar keys map to AGENTKERNEL_KEY and
// section keys to AGENTKERNEL_SECTION_KEY.
func applyEnv(cfg *Config, env map[string]string) error {
	return walk(reflect.ValueOf(cfg).Elem(), "", func(field string, v reflect.Value) error {
		name := EnvPrefix + strings.ToUpper(strings.ReplaceAll(field, ".", "_"))
		raw, ok := env[name]
		if !ok {
			return nil
		}
		if err := setScalar(v, raw); err != nil {
			return &FieldError{Field: field, Value: raw, Reason: fmt.Sprintf("from %s: %v", name, err)}
		}
		return nil
	})
}

// walk calls fn for every scalar key with its dotted TOML name.
func walk(v reflect.Value, prefix string, fn func(field string, v reflect.Value) error) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		name := tag
		if prefix != "" {
			name = prefix + "." + tag
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct && !reflect.PointerTo(fv.Type()).Implements(textUnmarshaler) {
			if err := walk(fv, name, fn); err != nil {
				return err
			}
			continue
		}
		if fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map {
			continue // arrays of tables ([[objects]]) are file-only
		}
		if err := fn(name, fv); err != nil {
			return err
		}
	}
	return nil
}

func setScalar(v reflect.Value, raw string) error {
	if v.CanAddr() && v.Addr().Type().Implements(textUnmarshaler) {
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(raw))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		v.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("not a boolean (true or false)")
		}
		v.SetBool(b)
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("not a number")
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("unsupported type %s", v.Kind())
	}
	return nil
}
