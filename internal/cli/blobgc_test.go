package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/snapshot"
)

// TestBlobGCAfterSIGKILLsDuringStop: a daemon SIGKILLed during `sandbox
// stop` leaves temp files (killed while the backup blob was written) and
// blobs no row references (killed between the blob and its row). While
// they are younger than the grace period, restarts keep them; a daemon
// started with no grace collects them at start, and afterwards exactly the
// blobs of backup rows remain, each restores, and no temp file is left.
func TestBlobGCAfterSIGKILLsDuringStop(t *testing.T) {
	bin := staticBinary(t)
	home := t.TempDir()
	addr := freePort(t)
	s := startServer(t, bin, home, addr)
	env := s.env()
	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create"))
	// Incompressible bytes, so the backup blob takes several writes and
	// the first kill lands in the middle of one.
	write := func(v string) {
		t.Helper()
		run(t, bin, env, 0, "sandbox", "exec", id, "--", "sh", "-c",
			"echo "+v+" > /workspace/v && head -c 3000000 /dev/urandom > /workspace/noise")
	}
	write("v0")
	run(t, bin, env, 0, "sandbox", "stop", id) // backup of v0
	run(t, bin, env, 0, "sandbox", "start", id)

	kills := []string{"snapshot-write-hang", "snapshot-hang", "before-stop-hang", "snapshot-write-hang", "snapshot-hang"}
	for i, failpoint := range kills {
		v := fmt.Sprint("v", i+1)
		write(v)
		flag := filepath.Join(home, "failpoint-"+failpoint)
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			cmd := exec.Command(bin, "sandbox", "stop", id)
			cmd.Env = env
			_ = cmd.Run() // fails when the daemon dies
		}()
		waitFile(t, flag+".reached", s)
		s.kill(t)
		<-stopped
		os.Remove(flag)
		os.Remove(flag + ".reached")
		s = startServer(t, bin, home, addr) // default grace: 1h
		if out := run(t, bin, env, 0, "sandbox", "exec", id, "--", "cat", "/workspace/v"); out != v+"\n" {
			t.Fatalf("after the kill at %s the sandbox holds %q, want %s (it must not have been stopped)", failpoint, out, v)
		}
	}

	backups := listBackups(t, bin, env, id)
	// v0's backup, and the one whose row was recorded before the kill at
	// before-stop-hang (kill 3, v3).
	if len(backups) != 2 {
		t.Fatalf("%d backup rows, want 2: %+v", len(backups), backups)
	}
	blobsDir := filepath.Join(home, "blobs")
	keys, temps := blobFiles(t, blobsDir)
	if len(keys) != 4 || len(temps) != 2 {
		t.Fatalf("before the GC: blobs %v and temp files %v; want 2 referenced + 2 orphaned blobs and 2 temp "+
			"files, kept by the 1h grace through every restart", keys, temps)
	}

	s.stop(t)
	s = startServer(t, bin, home, addr, "AGENTKERNEL_BLOB_GC_GRACE=0s")
	defer s.stop(t)
	waitMetric(t, addr, "agentkernel_blob_gc_runs_total", 1)

	keys, temps = blobFiles(t, blobsDir)
	if len(temps) != 0 {
		t.Errorf("temp files left after the GC: %v", temps)
	}
	var want []string
	for _, b := range backups {
		want = append(want, fmt.Sprintf("backups/%s/%s/%s.tar.zst", b.TenantID(keys), id, b.ID))
	}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("blobs after the GC: %v\nwant exactly the backups' blobs: %v", keys, want)
	}
	for kind, n := range map[string]float64{"blob": 2, "temp": 2} {
		if got := metric(t, addr, `agentkernel_blob_gc_deleted_total{kind="`+kind+`"}`); got != n {
			t.Errorf("deleted_total{kind=%q} = %v, want %v", kind, got, n)
		}
		if got := metric(t, addr, `agentkernel_blob_gc_deleted_bytes_total{kind="`+kind+`"}`); got <= 0 {
			t.Errorf("deleted_bytes_total{kind=%q} = %v, want the bytes freed", kind, got)
		}
	}

	// Every remaining backup restores, to the workspace it was taken of.
	st, err := fsblob.Open(context.Background(), blobsDir, fsblob.Options{SweepOlderThan: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, b := range backups { // oldest first
		r, _, err := st.Get(context.Background(), want[slices.IndexFunc(want, func(k string) bool { return strings.Contains(k, b.ID) })])
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "ws")
		_, err = snapshot.Replace(context.Background(), r, dir)
		r.Close()
		if err != nil {
			t.Fatalf("backup %s does not restore: %v", b.ID, err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "v"))
		if wantV := []string{"v0\n", "v3\n"}[i]; string(got) != wantV {
			t.Fatalf("backup %s restores v = %q, want %q", b.ID, got, wantV)
		}
	}
	// And the sandbox hibernates and wakes with its latest workspace.
	run(t, bin, env, 0, "sandbox", "stop", id)
	run(t, bin, env, 0, "sandbox", "start", id)
	if out := run(t, bin, env, 0, "sandbox", "exec", id, "--", "cat", "/workspace/v"); out != "v5\n" {
		t.Fatalf("after stop/start: %q", out)
	}
	run(t, bin, env, 0, "sandbox", "rm", id)
}

type backupRow struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
}

// TenantID finds the backup's tenant in the blob keys (backups/<tenant>/…).
func (b backupRow) TenantID(keys []string) string {
	for _, k := range keys {
		if strings.Contains(k, b.ID) {
			return strings.Split(k, "/")[1]
		}
	}
	return "<no blob>"
}

// listBackups returns the sandbox's backups, oldest first.
func listBackups(t *testing.T, bin string, env []string, id string) []backupRow {
	t.Helper()
	var bs []backupRow
	if err := json.Unmarshal([]byte(run(t, bin, env, 0, "sandbox", "backups", id, "--json")), &bs); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(bs, func(a, b backupRow) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return bs
}

// blobFiles lists the blob keys and temp files under the blob directory.
func blobFiles(t *testing.T, dir string) (keys, temps []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case strings.HasPrefix(d.Name(), ".tmp-"):
			temps = append(temps, rel)
		case strings.HasSuffix(rel, blob.ReservedSuffix):
			keys = append(keys, strings.TrimSuffix(rel, blob.ReservedSuffix))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys, temps
}

// waitFile waits until a failpoint was reached.
func waitFile(t *testing.T, path string, s *server) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared\n%s", path, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitMetric waits until the daemon's counter reaches at least want.
func waitMetric(t *testing.T, addr, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for metric(t, addr, name) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %v", name, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric reads one sample (name with its labels, as exposed) from /metrics;
// -1 when absent.
func metric(t *testing.T, addr, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && name == sample {
			f, err := strconv.ParseFloat(val, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}
