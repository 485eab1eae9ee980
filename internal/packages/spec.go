// Package packages builds environments' config.packages into a layer: a
// host directory filled once per environment version by the package
// managers' prefix installs (pip --target, npm --prefix) run in a build
// sandbox of the environment's own driver and image, then bind-mounted
// read-only at Path into every sandbox of the environment, with PATH,
// PYTHONPATH and NODE_PATH pointing into it.
//
// A layer and not an image: the same directory works for the process and
// the docker drivers, starting a sandbox costs one more bind mount (so
// wake latency stays the base image's), and the base image stays shared.
package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Path is where the layer appears inside a sandbox.
const Path = "/opt/agentkernel/packages"

// Sandbox metadata the daemon sets (never read from anything a sandbox
// writes; a tenant that sets them by hand gets at most its own layer).
const (
	// MetaLayer names the build whose layer a sandbox starts from.
	MetaLayer = "agentkernel.packages"
	// MetaBuild marks a build sandbox; it is honoured only for the sandbox
	// the build's row names.
	MetaBuild = "agentkernel.packages_build"
)

// Managers are the SDK's package lists (BetaPackages), in its order.
var Managers = []string{"apt", "cargo", "gem", "go", "npm", "pip"}

// Supported are the managers builds install with; the others are refused
// at the API with "not supported yet".
var Supported = map[string]bool{"npm": true, "pip": true}

// MaxPackages bounds the packages of one environment, all lists together.
const MaxPackages = 64

// maxName bounds one package specifier.
const maxName = 256

// Spec is an environment's config.packages.
type Spec struct {
	Apt   []string `json:"apt,omitempty"`
	Cargo []string `json:"cargo,omitempty"`
	Gem   []string `json:"gem,omitempty"`
	Go    []string `json:"go,omitempty"`
	Npm   []string `json:"npm,omitempty"`
	Pip   []string `json:"pip,omitempty"`
}

// List returns the list of manager mgr.
func (s *Spec) List(mgr string) *[]string {
	switch mgr {
	case "apt":
		return &s.Apt
	case "cargo":
		return &s.Cargo
	case "gem":
		return &s.Gem
	case "go":
		return &s.Go
	case "npm":
		return &s.Npm
	case "pip":
		return &s.Pip
	}
	return nil
}

// Empty says there is nothing to build.
func (s Spec) Empty() bool {
	for _, m := range Managers {
		if len(*s.List(m)) > 0 {
			return false
		}
	}
	return true
}

// FromConfig reads config.packages from an environment's stored config.
func FromConfig(config json.RawMessage) (Spec, error) {
	var doc struct {
		Packages Spec `json:"packages"`
	}
	if len(config) == 0 {
		return Spec{}, nil
	}
	if err := json.Unmarshal(config, &doc); err != nil {
		return Spec{}, fmt.Errorf("config.packages: %w", err)
	}
	return doc.Packages, nil
}

// CheckName says why a package specifier cannot be installed, or nil. A
// specifier is one argument to the manager: never an option (a leading
// "-"), no whitespace or control characters, and only the characters
// names, versions and version ranges use.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case len(name) > maxName:
		return fmt.Errorf("is %d bytes; the limit is %d", len(name), maxName)
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("%q starts with \"-\": a package, not an option to the package manager", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-~@/:=<>!+,*^[]", r)
		if !ok {
			return fmt.Errorf("%q has %q: a package name with an optional version (e.g. requests==2.31.0, lodash@4.17.21) uses letters, digits and . _ - ~ @ / : = < > ! + , * ^ [ ]", name, r)
		}
	}
	return nil
}

// Target is what a layer is built for: the packages, the base the build
// sandbox runs (driver and image, defaults resolved) and the indexes the
// managers use. Its Key names the build.
type Target struct {
	Spec        Spec   `json:"spec"`
	Driver      string `json:"driver"`
	Image       string `json:"image"`
	PipIndexURL string `json:"pip_index_url,omitempty"`
	NpmRegistry string `json:"npm_registry,omitempty"`
}

// Key is the build's content address: the same target is built once.
func (t Target) Key() string {
	b, _ := json.Marshal(struct {
		V int `json:"v"`
		Target
	}{1, t})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// steps are the installs of a build, one per package, so a failure names
// the package.
type step struct {
	Manager, Package string
	Argv             []string
}

// Layout inside Path.
const (
	pythonDir = Path + "/python"
	nodeDir   = Path + "/node"
)

func (t Target) steps() []step {
	var out []step
	for _, p := range t.Spec.Pip {
		argv := []string{"python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
			"--no-input", "--target", pythonDir}
		if t.PipIndexURL != "" {
			argv = append(argv, "--index-url", t.PipIndexURL)
			if host := hostOf(t.PipIndexURL); strings.HasPrefix(t.PipIndexURL, "http://") && host != "" {
				argv = append(argv, "--trusted-host", host)
			}
		}
		out = append(out, step{Manager: "pip", Package: p, Argv: append(argv, p)})
	}
	for _, p := range t.Spec.Npm {
		argv := []string{"npm", "install", "--global=false", "--prefix", nodeDir, "--no-audit", "--no-fund", "--no-update-notifier"}
		if t.NpmRegistry != "" {
			argv = append(argv, "--registry", t.NpmRegistry)
		}
		out = append(out, step{Manager: "npm", Package: p, Argv: append(argv, p)})
	}
	return out
}

// basePath is the drivers' default PATH, which the layer's directories go
// in front of.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the environment of a sandbox that has the layer.
func Env(basePath string) map[string]string {
	return map[string]string{
		"PATH":       pythonDir + "/bin:" + nodeDir + "/node_modules/.bin:" + basePath,
		"PYTHONPATH": pythonDir,
		"NODE_PATH":  nodeDir + "/node_modules",
	}
}
