package agentkernel_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// gcHome is one daemon home served by daemons started one after the
// other, each with a blob GC without grace: every start collects at once
// what no row holds, as a daemon an hour after the upload would.
type gcHome struct {
	home string
	d    *daemontest.Daemon
	// keys of the tenants' clients, by tenant name
	keys map[string]string
}

func newGCHome(t *testing.T) *gcHome {
	return &gcHome{home: t.TempDir(), keys: map[string]string{}}
}

// start runs a daemon on the home and waits for its GC's first pass.
func (h *gcHome) start(t *testing.T) {
	t.Helper()
	h.d = daemontest.Start(t, func(c *config.Config) {
		c.Home = h.home
		c.Blob.GCGrace = 0
	})
	waitGCPass(t, h.d.URL)
}

// restart stops the daemon (its objects' sandboxes go with it; the
// objects wake in new ones) and starts another on the same home.
func (h *gcHome) restart(t *testing.T) {
	t.Helper()
	if err := h.d.Stop(); err != nil {
		t.Fatal(err)
	}
	h.start(t)
}

func (h *gcHome) admin() *agentkernel.Client {
	return agentkernel.New(agentkernel.WithBaseURL(h.d.URL), agentkernel.WithAPIKey(h.d.AdminKey))
}

// tenant creates a tenant with a key and returns its id.
func (h *gcHome) tenant(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	ten, err := h.admin().Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := h.admin().Keys.Create(ctx, agentkernel.KeyCreateParams{Name: name, TenantID: ten.ID})
	if err != nil {
		t.Fatal(err)
	}
	h.keys[name] = k.Secret
	return ten.ID
}

// client is the tenant's client on the daemon running now.
func (h *gcHome) client(name string) *agentkernel.Client {
	return agentkernel.New(agentkernel.WithBaseURL(h.d.URL), agentkernel.WithAPIKey(h.keys[name]))
}

// bundleBlobs lists the blob keys under bundles/.
func (h *gcHome) bundleBlobs(t *testing.T) []string {
	t.Helper()
	out := []string{}
	for in, err := range h.d.Blobs().List(context.Background(), "bundles/") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, in.Key)
	}
	return out
}

// waitGCPass waits until the daemon's blob GC finished its first pass.
func waitGCPass(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for gcRuns(t, url) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the blob GC never finished its pass at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func gcRuns(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "agentkernel_blob_gc_runs_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// counterVersion is the counter app with a VERSION file saying v.
func counterVersion(t *testing.T, v string) string {
	t.Helper()
	dir := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(counterAppDir(t), "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "counter"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// appVersion reads /app/VERSION in the object's sandbox.
func appVersion(t *testing.T, c *agentkernel.Client, class, id string) string {
	t.Helper()
	ctx := context.Background()
	o, err := c.Objects.Get(ctx, class, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Sandboxes.Exec(ctx, o.SandboxID, agentkernel.ExecParams{Command: "cat /app/VERSION"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cat /app/VERSION: %+v %v", res, err)
	}
	return res.Stdout
}

// A tenant's bundle is held by its class, not by the blob GC's grace: it
// survives a GC pass and the object wakes on it; a new upload replaces it
// and the old archive is collected; deleting a class's bundle or the class
// lets the GC collect the archive once no class of the tenant holds it.
func TestObjectBundleLivesAsLongAsItsClassHoldsIt(t *testing.T) {
	ctx := context.Background()
	h := newGCHome(t)
	h.start(t)
	tenant := h.tenant(t, "acme")
	c := h.client("acme")
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	v1, err := c.Objects.UploadBundleDir(ctx, "tally", counterVersion(t, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 1 {
		t.Fatalf("increment: %s %v", r, err)
	}
	if _, err := c.Objects.Hibernate(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}

	h.restart(t)
	c = h.client("acme")
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "get"}); err != nil || value(t, r) != 1 {
		t.Fatalf("wake after a GC pass: %s %v", r, err)
	}
	if v := appVersion(t, c, "tally", "a"); v != "v1" {
		t.Fatalf("/app/VERSION = %q, want v1", v)
	}
	keyV1 := "bundles/" + tenant + "/sha256/" + v1.SHA256
	if got := h.bundleBlobs(t); !slices.Equal(got, []string{keyV1}) {
		t.Fatalf("bundle blobs after a GC pass: %v, want %v", got, []string{keyV1})
	}

	// Re-upload: the next wake gets the new code; the old archive is
	// garbage once the row moved on.
	if _, err := c.Objects.Hibernate(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
	v2dir := counterVersion(t, "v2")
	v2, err := c.Objects.UploadBundleDir(ctx, "tally", v2dir)
	if err != nil {
		t.Fatal(err)
	}
	keyV2 := "bundles/" + tenant + "/sha256/" + v2.SHA256
	h.restart(t)
	c = h.client("acme")
	if got := h.bundleBlobs(t); !slices.Equal(got, []string{keyV2}) {
		t.Fatalf("bundle blobs after a re-upload and a GC pass: %v, want only the new one %v", got, []string{keyV2})
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 2 {
		t.Fatalf("wake on the new bundle: %s %v", r, err)
	}
	if v := appVersion(t, c, "tally", "a"); v != "v2" {
		t.Fatalf("/app/VERSION = %q after the re-upload, want v2", v)
	}

	// A second class with the same bytes holds the same archive: deleting
	// the first class keeps it, deleting the second's bundle lets it go.
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally2", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Objects.UploadBundleDir(ctx, "tally2", v2dir); err != nil || b.SHA256 != v2.SHA256 {
		t.Fatalf("upload of the same bytes: %+v %v", b, err)
	}
	if err := c.Objects.Delete(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Objects.DeleteDefinition(ctx, "tally"); err != nil {
		t.Fatal(err)
	}
	h.restart(t)
	c = h.client("acme")
	if got := h.bundleBlobs(t); !slices.Equal(got, []string{keyV2}) {
		t.Fatalf("bundle blobs while tally2 holds the archive: %v, want %v", got, []string{keyV2})
	}
	if r, err := c.Objects.Call(ctx, "tally2", "b", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 1 {
		t.Fatalf("tally2 on the shared archive: %s %v", r, err)
	}
	if err := c.Objects.Delete(ctx, "tally2", "b"); err != nil {
		t.Fatal(err)
	}
	if err := c.Objects.DeleteBundle(ctx, "tally2"); err != nil {
		t.Fatal(err)
	}
	h.restart(t)
	if got := h.bundleBlobs(t); len(got) != 0 {
		t.Fatalf("bundle blobs after every class let go: %v, want none", got)
	}
}

// A bundle stored by an earlier version (a blob under bundles/TENANT/CLASS
// that no row holds) is adopted at start, before the GC's first pass: it
// survives that pass, moves to its content-addressed key, and the object
// runs on it.
func TestObjectBundleStoredWithoutARowIsAdoptedAtStart(t *testing.T) {
	ctx := context.Background()
	h := newGCHome(t)
	h.start(t)
	tenant := h.tenant(t, "acme")
	if _, err := h.client("acme").Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Stop(); err != nil {
		t.Fatal(err)
	}
	var tgz bytes.Buffer
	if err := agentkernel.PackBundle(&tgz, counterAppDir(t)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tgz.Bytes())
	digest := hex.EncodeToString(sum[:])
	blobs, err := fsblob.Open(ctx, filepath.Join(h.home, "blobs"), fsblob.Options{SweepOlderThan: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Put(ctx, "bundles/"+tenant+"/tally", bytes.NewReader(tgz.Bytes())); err != nil {
		t.Fatal(err)
	}
	blobs.Close()

	h.start(t)
	c := h.client("acme")
	b, err := c.Objects.Bundle(ctx, "tally")
	if err != nil || b.SHA256 != digest || b.Size != int64(tgz.Len()) {
		t.Fatalf("the old bundle after the first GC pass: %+v %v (want sha256 %s)", b, err, digest)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 1 {
		t.Fatalf("object on the adopted bundle: %s %v", r, err)
	}
	want := []string{"bundles/" + tenant + "/sha256/" + digest}
	if got := h.bundleBlobs(t); !slices.Equal(got, want) {
		t.Fatalf("bundle blobs after adoption: %v, want %v", got, want)
	}
	if err := c.Objects.Delete(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
}

// A bundle whose blob was lost from under its row (say, the blob store
// was restored from an older copy) fails the wake with a 503 that says to
// upload it again, not with an object running without its code.
func TestObjectBundleWithItsBlobLostAsksForAnUpload(t *testing.T) {
	ctx := context.Background()
	h := newGCHome(t)
	h.start(t)
	tenant := h.tenant(t, "acme")
	c := h.client("acme")
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Objects.UploadBundleDir(ctx, "tally", counterAppDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.Blobs().Delete(ctx, "bundles/"+tenant+"/sha256/"+b.SHA256); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(h.home, "bundles", "trees", tenant, b.SHA256)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"})
	if objStatus(err) != 503 || !strings.Contains(err.Error(), "missing from the blob store; upload it again") {
		t.Fatalf("call with the bundle's blob lost: %v", err)
	}
	if _, err := c.Objects.UploadBundleDir(ctx, "tally", counterAppDir(t)); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "tally", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 1 {
		t.Fatalf("after the upload: %s %v", r, err)
	}
	if err := c.Objects.Delete(ctx, "tally", "a"); err != nil {
		t.Fatal(err)
	}
}
