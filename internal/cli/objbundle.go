package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agentkernel/agentkernel"
)

// `agentkernel object bundle push|get|rm`: the app of a class defined
// through the API, mounted read-only at /app of its objects.

// bundleArgs parses a bundle verb's flags and checks it got n arguments.
func bundleArgs(m *Main, verb, usage string, args []string, n int) (*clientFlags, []string, error) {
	fs := m.newFlagSet("object bundle "+verb, "object bundle "+verb+" "+usage)
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, interleave(args, clientValueFlags)); err != nil {
		return nil, nil, err
	}
	if fs.NArg() != n {
		return nil, nil, fmt.Errorf("%w: object bundle %s takes %s", errUsage, verb, usage)
	}
	return &cf, fs.Args(), nil
}

func objectBundlePush(ctx context.Context, m *Main, args []string) error {
	cf, pos, err := bundleArgs(m, "push", "CLASS DIR (or a tar, tar.gz or tar.zst of it)", args, 2)
	if err != nil {
		return err
	}
	c := cf.client(m)
	class, src := pos[0], pos[1]
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
	// The digest alone on stdout, for scripts; the rest for people.
	fmt.Fprintf(m.Stderr, "bundle of %s: %d files, %d bytes unpacked, sha256:\n", b.Class, b.Files, b.Bytes)
	fmt.Fprintln(m.Stdout, b.SHA256)
	return nil
}

func objectBundleGet(ctx context.Context, m *Main, args []string) error {
	cf, pos, err := bundleArgs(m, "get", "CLASS", args, 1)
	if err != nil {
		return err
	}
	b, err := cf.client(m).Objects.Bundle(ctx, pos[0])
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, b)
	}
	fmt.Fprintf(m.Stdout, "class     %s\nsha256    %s\nsize      %d\nuploaded  %s\n", b.Class, b.SHA256, b.Size, b.UploadedAt.Format(time.RFC3339))
	return nil
}

func objectBundleRm(ctx context.Context, m *Main, args []string) error {
	cf, pos, err := bundleArgs(m, "rm", "CLASS", args, 1)
	if err != nil {
		return err
	}
	if err := cf.client(m).Objects.DeleteBundle(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "deleted the bundle of %s\n", pos[0])
	return nil
}
