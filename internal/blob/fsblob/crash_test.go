package fsblob

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// The crash tests re-execute the test binary as a writer ("child") and
// SIGKILL it while it writes, then check from the parent that the key is
// either absent or a complete, verified blob, and that the temp files it left
// are swept.
const (
	crashChildEnv  = "FSBLOB_CRASH_CHILD" // "block" or "loop"
	crashDirEnv    = "FSBLOB_CRASH_DIR"
	crashMarkerEnv = "FSBLOB_CRASH_MARKER"
	crashSeedEnv   = "FSBLOB_CRASH_SEED"
	crashSizeEnv   = "FSBLOB_CRASH_SIZE"
	crashKey       = "snap/k"
)

// runCrashChild is the child's whole life. "block": Put one blob and, once
// half of it is read from the source, create the marker and hang inside
// Read until killed. "loop": Put generation after generation of the key
// until killed.
func runCrashChild() {
	ctx := context.Background()
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	size, _ := strconv.ParseInt(os.Getenv(crashSizeEnv), 10, 64)
	s, err := Open(ctx, os.Getenv(crashDirEnv), Options{SweepOlderThan: -1})
	if err != nil {
		os.Stderr.WriteString("child open: " + err.Error() + "\n")
		os.Exit(2)
	}
	switch os.Getenv(crashChildEnv) {
	case "block":
		src := newGen(seed, size)
		src.onRead = func(served int64) {
			if served >= size/2 {
				os.WriteFile(os.Getenv(crashMarkerEnv), nil, 0o644)
				time.Sleep(time.Hour)
			}
		}
		s.Put(ctx, crashKey, src)
	case "loop":
		for g := seed; ; g++ {
			if _, err := s.Put(ctx, crashKey, newGen(g, size)); err != nil {
				os.Stderr.WriteString("child put: " + err.Error() + "\n")
				os.Exit(2)
			}
		}
	}
	os.Exit(3) // "block" must never get here
}

func startChild(t *testing.T, role, dir, marker string, seed uint64, size int64) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		crashChildEnv+"="+role, crashDirEnv+"="+dir, crashMarkerEnv+"="+marker,
		crashSeedEnv+"="+strconv.FormatUint(seed, 10), crashSizeEnv+"="+strconv.FormatInt(size, 10))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	return cmd
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL child: %v", err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
}

func waitForFile(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child never created %s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tempFiles lists the temp files anywhere under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// readSeed reads key fully (verification included) and returns the
// generation stamped in its first 8 bytes, or ok=false when key is absent.
func readSeed(t *testing.T, s *Store, size int64) (seed uint64, ok bool) {
	t.Helper()
	rc, info, err := s.Get(context.Background(), crashKey)
	if errors.Is(err, blob.ErrNotFound) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("Get after kill: %v", err)
	}
	defer rc.Close()
	var head [8]byte
	if _, err := io.ReadFull(rc, head[:]); err != nil {
		t.Fatalf("read head after kill: %v", err)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatalf("blob after kill failed verification: %v", err)
	}
	seed = binary.LittleEndian.Uint64(head[:])
	if info.Size != size || info.SHA256 != genSHA256(seed, size) {
		t.Fatalf("blob after kill: info %+v is not generation %d (size %d sha256 %s)", info, seed, size, genSHA256(seed, size))
	}
	return seed, true
}

func TestCrashMidPut(t *testing.T) {
	ctx := context.Background()
	dir, tmp := t.TempDir(), t.TempDir()
	const size = 64 << 20

	// 1. Killed during the first write: the key must not exist.
	marker := filepath.Join(tmp, "midway1")
	kill(t, waitChild(t, startChild(t, "block", dir, marker, 1, size), marker))
	if len(tempFiles(t, dir)) == 0 {
		t.Fatal("no temp file after a write killed midway: the test did not kill mid-write")
	}
	s := openNoSweep(t, dir)
	if _, ok := readSeed(t, s, size); ok {
		t.Fatal("key exists after its only write was killed midway")
	}
	for info, err := range s.List(ctx, "") {
		t.Fatalf("List after killed write yielded %+v, %v; want nothing", info, err)
	}

	// 2. A complete write, then an overwrite killed midway: the old blob
	// must still be there, whole.
	if _, err := s.Put(ctx, crashKey, newGen(2, size)); err != nil {
		t.Fatal(err)
	}
	marker = filepath.Join(tmp, "midway2")
	kill(t, waitChild(t, startChild(t, "block", dir, marker, 3, size), marker))
	if seed, ok := readSeed(t, s, size); !ok || seed != 2 {
		t.Fatalf("after a killed overwrite the key holds generation %d (present %v), want the complete generation 2", seed, ok)
	}

	// 3. Cleanup removes what the killed writers left.
	n, err := s.Cleanup(ctx, 0)
	if err != nil || n != 2 {
		t.Fatalf("Cleanup = %d, %v; want the 2 temp files of the killed writers", n, err)
	}
	if left := tempFiles(t, dir); len(left) != 0 {
		t.Fatalf("temp files left after Cleanup: %q", left)
	}
}

func waitChild(t *testing.T, cmd *exec.Cmd, marker string) *exec.Cmd {
	t.Helper()
	waitForFile(t, marker)
	return cmd
}

func openNoSweep(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, Options{SweepOlderThan: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestCrashRandomKills kills a writer that overwrites one key in a loop at
// random moments (so some kills land in fsync, rename or directory fsync)
// and checks after each kill that the key is absent or exactly one complete
// generation, and that Open's sweep removes the leftovers.
func TestCrashRandomKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a writer process repeatedly")
	}
	const size = 4 << 20
	dir := t.TempDir()
	last := uint64(0)
	for round := range 6 {
		first := uint64(round+1) * 1_000_000
		cmd := startChild(t, "loop", dir, "", first, size)
		time.Sleep(time.Duration(50+rand.IntN(350)) * time.Millisecond)
		kill(t, cmd)

		// Open with a clock two hours ahead: its sweep must treat every
		// leftover temp file as stale and remove it.
		s, err := Open(context.Background(), dir, Options{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		seed, ok := readSeed(t, s, size)
		s.Close()
		switch {
		case !ok && last != 0:
			t.Fatalf("round %d: key vanished; it held generation %d before this writer started", round, last)
		case ok && seed != last && (seed < first || seed >= first+1_000_000):
			t.Fatalf("round %d: key holds generation %d, written by neither this writer (from %d) nor the last one (%d)", round, seed, first, last)
		}
		if ok {
			last = seed
		}
		if left := tempFiles(t, dir); len(left) != 0 {
			t.Fatalf("round %d: Open's sweep left temp files: %q", round, left)
		}
		t.Logf("round %d: key holds generation %d (present %v)", round, seed, ok)
	}
}
