package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// runObjectInit implements `agentkernel object init --lang go|python|node DIR`:
// it writes a counter object server built on the helper for that language
// into DIR, with the helper itself copied in so DIR runs (and, for Go,
// builds) offline, and a README.md with the [[objects]] entry to register it.
// args are the arguments after `object init`.
func runObjectInit(_ context.Context, m *Main, args []string) error {
	fset := m.newFlagSet("object init", "object init --lang go|python|node [--class NAME] [--force] DIR")
	lang := fset.String("lang", "", "language of the server: go, python or node")
	class := fset.String("class", "counter", "object class name for the agentkernel.toml entry")
	force := fset.Bool("force", false, "overwrite files that already exist in DIR")
	// Accept flags after DIR too (`object init DIR --lang go`).
	var pos []string
	for {
		if err := parse(fset, args); err != nil {
			return err
		}
		if fset.NArg() == 0 {
			break
		}
		pos = append(pos, fset.Arg(0))
		args = fset.Args()[1:]
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one DIR, got %d arguments", errUsage, len(pos))
	}
	if !classNameOK(*class) {
		return fmt.Errorf("%w: --class %q: use 1-63 of a-z, 0-9, '-', '_', starting with a letter or digit", errUsage, *class)
	}
	dir, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	files, err := scaffold(*lang, *class, dir)
	if err != nil {
		return err
	}
	if !*force {
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, f.path)); err == nil {
				return fmt.Errorf("%s already exists; pass --force to overwrite", filepath.Join(dir, f.path))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
	}
	fmt.Fprintf(m.Stdout, "wrote a %s %q object server to %s; see %s for how to run and register it\n",
		*lang, *class, dir, filepath.Join(dir, "README.md"))
	return nil
}

func classNameOK(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && (r == '-' || r == '_')
		if !ok {
			return false
		}
	}
	return !strings.HasPrefix(s, "-")
}
