package agentkernel_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// tenantClient makes a tenant with a (non-admin) key and a client on it.
func tenantClient(t *testing.T, d *daemontest.Daemon, admin *agentkernel.Client, name string) *agentkernel.Client {
	t.Helper()
	ctx := context.Background()
	ten, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: name, TenantID: ten.ID})
	if err != nil {
		t.Fatal(err)
	}
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(k.Secret))
	t.Cleanup(func() {
		objs, _ := c.Objects.List(context.Background(), agentkernel.ObjectListParams{})
		for _, o := range objs {
			_ = c.Objects.Delete(context.Background(), o.Class, o.ID)
		}
	})
	return c
}

// bundleTrees lists the unpacked bundles a daemon keeps on its host.
func bundleTrees(t *testing.T, home string) []string {
	t.Helper()
	var out []string
	tenants, _ := os.ReadDir(filepath.Join(home, "bundles", "trees"))
	for _, ten := range tenants {
		digests, _ := os.ReadDir(filepath.Join(home, "bundles", "trees", ten.Name()))
		for _, d := range digests {
			out = append(out, ten.Name()+"/"+d.Name())
		}
	}
	return out
}

// brokenApp is a bundle whose "counter" exits at once, saying so.
func brokenApp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counter"), []byte("#!/bin/sh\necho bundle-v2 is broken >&2\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Tenants ship object code as a bundle: a tenant key defines a class,
// uploads the counter as a tar.gz, and the counter keeps its count across
// hibernation and wake. A new upload is for new wakes: the running object
// keeps its files until it hibernates. Deleting the class removes the
// unpacked bundle from the host.
func TestObjectBundleCounterAcrossHibernation(t *testing.T) {
	ctx := context.Background()
	d, admin := objectDaemon(t)
	c := tenantClient(t, d, admin, "acme")
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	v1 := counterAppDir(t)
	b, err := c.Objects.UploadBundleDir(ctx, "tally", v1)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.SHA256) != 64 || b.Files != 1 || b.Bytes == 0 || b.Size == 0 {
		t.Fatalf("upload answer: %+v", b)
	}
	if def, err := c.Objects.Definition(ctx, "tally"); err != nil || def.Bundle == nil || def.Bundle.SHA256 != b.SHA256 {
		t.Fatalf("definition: %+v %v", def, err)
	}
	for i := int64(1); i <= 2; i++ {
		r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"})
		if err != nil || value(t, r) != i {
			t.Fatalf("increment %d: %s %v", i, r, err)
		}
	}
	if o, err := c.Objects.Hibernate(ctx, "tally", "a"); err != nil || o.Status != "Hibernating" {
		t.Fatalf("hibernate: %+v %v", o, err)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "get"}); err != nil || value(t, r) != 2 {
		t.Fatalf("after wake: %s %v", r, err)
	}
	o, err := c.Objects.Get(ctx, "tally", "a")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Sandboxes.Exec(ctx, o.SandboxID, agentkernel.ExecParams{Command: "echo x > /app/counter"}); err != nil || res.ExitCode == 0 {
		t.Fatalf("writing /app in the sandbox: %+v %v", res, err)
	}

	// A new upload does not touch the running object...
	if _, err := c.Objects.UploadBundleDir(ctx, "tally", brokenApp(t)); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 3 {
		t.Fatalf("running object after a new upload: %s %v", r, err)
	}
	if n := len(bundleTrees(t, d.Config.Home)); n != 2 {
		t.Fatalf("%d unpacked bundles while the old one is mounted, want 2", n)
	}
	// ...the next wake gets it...
	if _, err := c.Objects.Hibernate(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
	if n := len(bundleTrees(t, d.Config.Home)); n != 1 {
		t.Fatalf("%d unpacked bundles after the old one's last object stopped, want 1", n)
	}
	if _, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "get"}); objStatus(err) != 503 || !strings.Contains(err.Error(), "bundle-v2 is broken") {
		t.Fatalf("wake on the broken bundle: %v", err)
	}
	// ...and a fixed upload the one after.
	if _, err := c.Objects.UploadBundleDir(ctx, "tally", v1); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "get"}); err != nil || value(t, r) != 3 {
		t.Fatalf("wake on the fixed bundle: %s %v", r, err)
	}

	if err := c.Objects.Delete(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Objects.DeleteDefinition(ctx, "tally"); err != nil {
		t.Fatal(err)
	}
	if trees := bundleTrees(t, d.Config.Home); len(trees) != 0 {
		t.Fatalf("unpacked bundles left after the class was deleted: %v", trees)
	}
}

// One tenant's bundle is invisible and unusable to another, whose class of
// the same name gets nothing at /app.
func TestObjectBundleIsTenantScoped(t *testing.T) {
	ctx := context.Background()
	d, admin := objectDaemon(t)
	a := tenantClient(t, d, admin, "tenant-a")
	b := tenantClient(t, d, admin, "tenant-b")
	if _, err := a.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Objects.UploadBundleDir(ctx, "tally", counterAppDir(t)); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Objects.Call(ctx, "tally", "x", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 1 {
		t.Fatalf("tenant a: %s %v", r, err)
	}

	if _, err := b.Objects.Bundle(ctx, "tally"); !agentkernel.IsNotFound(err) {
		t.Fatalf("tenant b sees a's bundle: %v", err)
	}
	if _, err := b.Objects.UploadBundle(ctx, "tally", bytes.NewReader(tarball(t, tarEntry{name: "counter", body: "x"}))); !agentkernel.IsNotFound(err) {
		t.Fatalf("tenant b replaced a's bundle: %v", err)
	}
	if err := b.Objects.DeleteBundle(ctx, "tally"); !agentkernel.IsNotFound(err) {
		t.Fatalf("tenant b deleted a's bundle: %v", err)
	}
	// b's own class of the same name has no bundle, and no /app of a's.
	if _, err := b.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	if def, err := b.Objects.Definition(ctx, "tally"); err != nil || def.Bundle != nil {
		t.Fatalf("tenant b's class: %+v %v", def, err)
	}
	if _, err := b.Objects.Call(ctx, "tally", "x", agentkernel.ObjectCall{Method: "get"}); objStatus(err) != 503 {
		t.Fatalf("tenant b's object ran without a bundle: %v", err)
	}
	if err := b.Objects.DeleteDefinition(ctx, "tally"); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Objects.Call(ctx, "tally", "x", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 2 {
		t.Fatalf("tenant a after b's attempts: %s %v", r, err)
	}
	if bb, err := a.Objects.Bundle(ctx, "tally"); err != nil || bb.SHA256 == "" {
		t.Fatalf("tenant a's bundle: %+v %v", bb, err)
	}
}

type tarEntry struct {
	name, body, link string
	typ              byte
}

func tarball(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Linkname: e.link, ModTime: time.Unix(1_700_000_000, 0)}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// zeroTar is a tar of one file of n zero bytes, streamed.
func zeroTar(t *testing.T, n int64) []byte {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: n})
		if err == nil {
			_, err = io.CopyN(tw, zeros{}, n)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := io.Copy(zw, pr); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// streamed hides a reader's length, so the upload is chunked.
type streamed struct{ io.Reader }

// Hostile and oversized bundles are refused with a 400 or 413 that names
// the entry or the limit; nothing lands outside the daemon's private
// extraction directory, nothing is left in it, and the class keeps having
// no bundle.
func TestMaliciousBundlesAreRefused(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t, func(c *config.Config) {
		c.DurableObjects.MaxBundleBytes = 256 << 10
		c.DurableObjects.MaxBundleUnpackedBytes = 2 << 20
		c.DurableObjects.MaxBundleFiles = 50
	})
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	c := tenantClient(t, d, admin, "mallory")
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "app", InitCommand: []string{"/app/run"}}); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 300<<10)
	rand.Read(random)
	many := []tarEntry{}
	for i := range 60 {
		many = append(many, tarEntry{name: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	reg := func(name string) tarEntry { return tarEntry{name: name, body: "pwned"} }
	cases := []struct {
		name string
		body io.Reader
		code int
		want []string
	}{
		{"dotdot", bytes.NewReader(tarball(t, reg("ok"), reg("../escape"))), 400, []string{`"../escape"`, `".." would leave the bundle`}},
		{"nested dotdot", bytes.NewReader(gzipped(t, tarball(t, reg("a/../../escape")))), 400, []string{`"a/../../escape"`}},
		{"absolute path", bytes.NewReader(tarball(t, reg(filepath.Join(outside, "abs")))), 400, []string{"absolute path"}},
		{"symlink out", bytes.NewReader(tarball(t, tarEntry{name: "ln", typ: tar.TypeSymlink, link: outside}, reg("ln/escape"))), 400, []string{`"ln"`, "leads out of the bundle"}},
		{"relative symlink out", bytes.NewReader(tarball(t, tarEntry{name: "a/up", typ: tar.TypeSymlink, link: "../../" + filepath.Base(outside)}, reg("a/up/escape"))), 400, []string{`"a/up"`, "leads out of the bundle"}},
		{"symlink chain out", bytes.NewReader(tarball(t, reg("d/x"), tarEntry{name: "d/up", typ: tar.TypeSymlink, link: ".."}, tarEntry{name: "e", typ: tar.TypeSymlink, link: "d/up/.."})), 400, []string{`"e"`, "leads out of the bundle"}},
		{"hard link out", bytes.NewReader(tarball(t, tarEntry{name: "h", typ: tar.TypeLink, link: "../" + filepath.Base(outside) + "/secret"})), 400, []string{"hard link", "leads out of the bundle"}},
		{"hard link absolute", bytes.NewReader(tarball(t, tarEntry{name: "h", typ: tar.TypeLink, link: filepath.Join(outside, "secret")})), 400, []string{"hard link", "leads out of the bundle"}},
		{"device node", bytes.NewReader(tarball(t, reg("run"), tarEntry{name: "null", typ: tar.TypeChar})), 400, []string{`"null"`, "device nodes"}},
		{"fifo", bytes.NewReader(tarball(t, reg("run"), tarEntry{name: "p", typ: tar.TypeFifo})), 400, []string{`"p"`, "FIFOs"}},
		{"over max_bundle_bytes", bytes.NewReader(tarball(t, tarEntry{name: "big", body: string(random)})), 413, []string{"durable_objects.max_bundle_bytes"}},
		{"over max_bundle_bytes, streamed", streamed{bytes.NewReader(tarball(t, tarEntry{name: "big", body: string(random)}))}, 413, []string{"durable_objects.max_bundle_bytes"}},
		{"gzip bomb", bytes.NewReader(zeroTar(t, 64<<20)), 413, []string{"durable_objects.max_bundle_unpacked_bytes"}},
		{"too many files", bytes.NewReader(tarball(t, many...)), 413, []string{"durable_objects.max_bundle_files"}},
		{"not a tar", bytes.NewReader(bytes.Repeat([]byte("not a tarball "), 100)), 400, []string{"not a readable tar archive"}},
		{"no files", bytes.NewReader(tarball(t)), 400, []string{"no files"}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			_, err := c.Objects.UploadBundle(ctx, "app", tc.body)
			if objStatus(err) != tc.code {
				t.Fatalf("upload: %v, want %d", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("something was written outside: %v", ents)
			}
			if _, err := c.Objects.Bundle(ctx, "app"); !agentkernel.IsNotFound(err) {
				t.Fatalf("the refused bundle was stored: %v", err)
			}
			for _, dir := range []string{"tmp", "trees"} {
				if ents, _ := os.ReadDir(filepath.Join(d.Config.Home, "bundles", dir)); len(ents) != 0 {
					t.Fatalf("bundles/%s holds %v after a refused upload", dir, ents)
				}
			}
			if _, err := os.Lstat(filepath.Join(d.Config.Home, "bundles", "escape")); err == nil {
				t.Fatal("an entry escaped into the bundles dir")
			}
		})
	}
}

// The same bundle on the docker driver: the unpacked tree is bind-mounted
// read-only at /app of the container (when dockerd and the test image are
// there, like the other docker tests).
func TestObjectBundleOnDocker(t *testing.T) {
	ctx := context.Background()
	requireDocker(t)
	d, admin := objectDaemon(t)
	c := tenantClient(t, d, admin, "acme")
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", Driver: "docker", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Objects.UploadBundleDir(ctx, "tally", counterAppDir(t)); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 2; i++ {
		if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != i {
			t.Fatalf("increment %d: %s %v", i, r, err)
		}
	}
	if _, err := c.Objects.Hibernate(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "get"}); err != nil || value(t, r) != 2 {
		t.Fatalf("after wake on docker: %s %v", r, err)
	}
	// /app is read-only inside the container too.
	o, err := c.Objects.Get(ctx, "tally", "a")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Sandboxes.Exec(ctx, o.SandboxID, agentkernel.ExecParams{Command: "echo x > /app/counter"})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("writing /app in the container: %+v %v", res, err)
	}
}
