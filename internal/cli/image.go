package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentkernel/agentkernel/internal/image"
)

// imageCommand manages the process driver's images on the local disk
// directly: the daemon reads ImagesDir at sandbox start, so no daemon call
// is needed (or wanted: a large tarball never crosses the API).
func imageCommand() command {
	return command{name: "image", summary: "the process driver's images, on this machine's disk", subs: []command{
		{name: "import", summary: "import a root filesystem tarball as an image", run: imageImport},
		{name: "ls", aliases: []string{"list"}, summary: "list images", run: imageList},
		{name: "rm", aliases: []string{"remove"}, summary: "remove an image", run: imageRemove},
	}}
}

// imageFlags locate the images dir: --images-dir, else $home/images with
// home from --home, $AGENTKERNEL_HOME or ~/.local/share/agentkernel.
type imageFlags struct {
	dir  string
	home string
	json bool
}

func (f *imageFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "images-dir", "", "images directory (default $AGENTKERNEL_HOME/images)")
	fs.StringVar(&f.home, "home", "", "agentkernel home (default $AGENTKERNEL_HOME or ~/.local/share/agentkernel)")
	fs.BoolVar(&f.json, "json", false, "print JSON for scripts instead of a table")
}

func (f *imageFlags) imagesDir(m *Main) (string, error) {
	if f.dir != "" {
		return f.dir, nil
	}
	home := f.home
	if home == "" {
		home = m.getenv("AGENTKERNEL_HOME")
	}
	if home == "" {
		userHome := m.getenv("HOME")
		if userHome == "" {
			var err error
			if userHome, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("cannot find the images dir: set --images-dir, --home or AGENTKERNEL_HOME (%v)", err)
			}
		}
		home = filepath.Join(userHome, ".local", "share", "agentkernel")
	}
	return filepath.Join(home, "images"), nil
}

// parseInterleaved parses flags wherever they appear among the positional
// arguments (`import NAME FILE --force` as well as `import --force NAME
// FILE`) and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func imageImport(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("image import", "image import NAME TARBALL [--force] [--images-dir DIR]\n\n"+
		"TARBALL is a root filesystem as a tar, .tar.gz or .tar.zst file, or - for stdin.\n"+
		"--force replaces an existing image; stop sandboxes running on it first.")
	var f imageFlags
	f.register(fs)
	force := fs.Bool("force", false, "replace an existing image of that name")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: image import takes NAME and TARBALL", errUsage)
	}
	name, file := pos[0], pos[1]
	if err := image.ValidateName(name); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	dir, err := f.imagesDir(m)
	if err != nil {
		return err
	}
	var r io.Reader = m.Stdin
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return err
		}
		defer fh.Close()
		r = fh
	}
	if !f.json {
		fmt.Fprintf(m.Stderr, "importing %s into %s …\n", file, filepath.Join(dir, name))
	}
	info, err := image.Import(ctx, dir, name, r, *force)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(m.Stdout, info)
	}
	fmt.Fprintf(m.Stdout, "imported image %s: %d files, %s", info.Name, info.Files, humanBytes(info.Bytes))
	if info.Skipped > 0 {
		fmt.Fprintf(m.Stdout, " (%d device files skipped)", info.Skipped)
	}
	fmt.Fprintln(m.Stdout)
	return nil
}

func imageList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("image ls", "image ls [--json] [--images-dir DIR]")
	var f imageFlags
	f.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: image ls takes no arguments", errUsage)
	}
	dir, err := f.imagesDir(m)
	if err != nil {
		return err
	}
	list, err := image.List(ctx, dir)
	if err != nil {
		return err
	}
	if f.json {
		if list == nil {
			list = []image.Info{}
		}
		return printJSON(m.Stdout, list)
	}
	rows := make([][]string, 0, len(list))
	for _, i := range list {
		rows = append(rows, []string{i.Name, strconv.FormatInt(i.Files, 10), humanBytes(i.Bytes), i.ImportedAt.Local().Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"NAME", "FILES", "SIZE", "IMPORTED"}, rows)
}

func imageRemove(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("image rm", "image rm NAME [--images-dir DIR]\n\nStop sandboxes running on the image first.")
	var f imageFlags
	f.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: image rm takes one image name", errUsage)
	}
	dir, err := f.imagesDir(m)
	if err != nil {
		return err
	}
	if err := image.Remove(ctx, dir, pos[0]); err != nil {
		if errors.Is(err, image.ErrNotFound) {
			return fmt.Errorf("%w (images dir %s)", err, dir)
		}
		return err
	}
	fmt.Fprintf(m.Stdout, "removed image %s\n", pos[0])
	return nil
}

// humanBytes formats a size for people (1.5 MiB).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
