package object_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel"
)

// unpackedBundles counts the bundle trees a daemon keeps on its host.
func unpackedBundles(t *testing.T, home string) int {
	t.Helper()
	n := 0
	tenants, _ := os.ReadDir(filepath.Join(home, "bundles", "trees"))
	for _, ten := range tenants {
		digests, _ := os.ReadDir(filepath.Join(home, "bundles", "trees", ten.Name()))
		n += len(digests)
	}
	return n
}

// An object that outlives a killed daemon keeps the bundle it mounted: the
// restarted daemon does not collect it, even when its class is deleted,
// until the object stops.
func TestBundleOfAnObjectThatOutlivedTheDaemonIsKept(t *testing.T) {
	_, app := builds(t)
	e := newServeEnv(t)
	s := e.start(t)
	ctx := context.Background()
	if _, err := s.client.Objects.Define(ctx, agentkernel.ObjectClass{Class: "mine", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	var tgz bytes.Buffer
	if err := agentkernel.PackBundle(&tgz, app); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Objects.UploadBundle(ctx, "mine", &tgz); err != nil {
		t.Fatal(err)
	}
	if r, err := s.client.Objects.Call(ctx, "mine", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil || sdkValue(r) != 1 {
		t.Fatalf("increment: %s %v", r, err)
	}
	e.kill(t)
	s = e.start(t)
	if err := s.client.Objects.DeleteDefinition(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if n := unpackedBundles(t, e.home); n != 1 {
		t.Fatalf("%d unpacked bundles while a surviving object mounts one, want 1", n)
	}
	// The object still runs on it (a deleted class cannot be called, but
	// its live storage can be read through the running server).
	o, err := s.client.Objects.Get(ctx, "mine", "a")
	if err != nil || o.Status != "Active" || string(o.Storage["count"]) != "1" {
		t.Fatalf("surviving object: %+v %v", o, err)
	}
	if _, err := s.client.Objects.Hibernate(ctx, "mine", "a"); err != nil {
		t.Fatal(err)
	}
	if n := unpackedBundles(t, e.home); n != 0 {
		t.Fatalf("%d unpacked bundles after the last object using it stopped, want 0", n)
	}
}
