package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/agentkernel/agentkernel"
)

const bundleUsage = "object bundle push CLASS DIR|FILE.tar[.gz|.zst] | get CLASS | rm CLASS"

// objectBundle implements `agentkernel object bundle push|get|rm`: the app
// of a class defined through the API, mounted read-only at /app.
func objectBundle(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: agentkernel %s", errUsage, bundleUsage)
	}
	sub, rest := args[0], args[1:]
	fs := m.newFlagSet("object bundle "+sub, bundleUsage)
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, interleave(rest, clientValueFlags)); err != nil {
		return err
	}
	c := cf.client(m)
	switch sub {
	case "push", "upload":
		if fs.NArg() != 2 {
			return fmt.Errorf("%w: object bundle push CLASS DIR (or a tar, tar.gz or tar.zst of it)", errUsage)
		}
		class, src := fs.Arg(0), fs.Arg(1)
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		var b *agentkernel.ObjectBundle
		if fi.IsDir() {
			fmt.Fprintf(m.Stderr, "packing %s and uploading it…\n", src)
			b, err = c.Objects.UploadBundleDir(ctx, class, src)
		} else {
			f, ferr := os.Open(src)
			if ferr != nil {
				return ferr
			}
			defer f.Close()
			fmt.Fprintf(m.Stderr, "uploading %s (%d bytes)…\n", src, fi.Size())
			b, err = c.Objects.UploadBundle(ctx, class, f)
		}
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, b)
		}
		fmt.Fprintf(m.Stdout, "bundle of %s: sha256 %s, %d files, %d bytes unpacked\n", b.Class, b.SHA256, b.Files, b.Bytes)
		return nil
	case "get", "show":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: object bundle get CLASS", errUsage)
		}
		b, err := c.Objects.Bundle(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, b)
		}
		fmt.Fprintf(m.Stdout, "class     %s\nsha256    %s\nsize      %d\nuploaded  %s\n", b.Class, b.SHA256, b.Size, b.UploadedAt.Format("2006-01-02T15:04:05Z07:00"))
		return nil
	case "rm", "delete":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: object bundle rm CLASS", errUsage)
		}
		if err := c.Objects.DeleteBundle(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "deleted the bundle of %s\n", fs.Arg(0))
		return nil
	}
	return fmt.Errorf("%w: unknown bundle subcommand %q (%s)", errUsage, sub, bundleUsage)
}
