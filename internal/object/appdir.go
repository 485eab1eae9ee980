package object

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/internal/config"
)

// A host app_dir is an operator's decision: only [[objects]] may name one,
// only under durable_objects.app_roots, never overlapping the daemon's own
// files (its home with admin.key and state.db, blobs, run dir). Paths are
// compared after symlinks and ".." are resolved, so a link under a root
// that leads elsewhere is refused like the place it leads to.

// appRoots holds the resolved roots and the daemon's private paths.
type appRoots struct {
	roots   []string // resolved
	named   []string // as configured, for messages
	private []string // resolved where they exist
}

func newAppRoots(roots, private []string) (*appRoots, error) {
	a := &appRoots{named: roots}
	for i, r := range roots {
		res, err := filepath.EvalSymlinks(r)
		if err != nil {
			return nil, &config.FieldError{Field: fmt.Sprintf("durable_objects.app_roots[%d]", i), Value: r, Reason: err.Error(), Accepted: "an existing host directory"}
		}
		a.roots = append(a.roots, res)
	}
	for _, p := range private {
		if p == "" {
			continue
		}
		if res, err := filepath.EvalSymlinks(p); err == nil {
			p = res
		} else if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		a.private = append(a.private, filepath.Clean(p))
	}
	return a, nil
}

// under reports whether p is dir or inside it (both resolved and clean).
func under(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// resolve returns the directory app_dir names, resolved, or an error naming
// field and the rule it breaks.
func (a *appRoots) resolve(field, appDir string) (string, error) {
	fe := func(reason string) error {
		return &config.FieldError{Field: field, Value: appDir, Reason: reason,
			Accepted: fmt.Sprintf("a directory under durable_objects.app_roots %q, after symlinks and \"..\" are resolved", a.named)}
	}
	if !filepath.IsAbs(appDir) {
		return "", fe("not an absolute host directory")
	}
	res, err := filepath.EvalSymlinks(appDir)
	if err != nil {
		return "", fe(err.Error())
	}
	if fi, err := os.Stat(res); err != nil || !fi.IsDir() {
		return "", fe("not a directory")
	}
	for _, p := range a.private {
		if under(res, p) || under(p, res) {
			return "", fe(fmt.Sprintf("resolves to %s, which overlaps the daemon's own %s (its keys, state or sandboxes would be visible at /app)", res, p))
		}
	}
	for _, r := range a.roots {
		if under(res, r) {
			return res, nil
		}
	}
	if len(a.roots) == 0 {
		return "", fe(fmt.Sprintf("resolves to %s, and durable_objects.app_roots allows no host directory", res))
	}
	return "", fe(fmt.Sprintf("resolves to %s, which is outside every durable_objects.app_roots entry", res))
}
