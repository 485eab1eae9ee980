//go:build failpoints

package daemon

import (
	"context"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// Sandbox failpoints (crash-test builds only). While $home/failpoint-<name>
// exists, the daemon reaching <name> writes $home/failpoint-<name>.reached
// and hangs there, so a test can SIGKILL it at that exact point:
//
//   - snapshot-write-hang: a backup blob's first bytes are in its temp file;
//     the rest is not written.
//   - snapshot-hang: the backup blob is written, not yet verified, and no
//     row references it.
//   - before-stop-hang: the backup row is recorded; the sandbox is not
//     stopped yet.
func sandboxFaults(home string) *sandbox.Faults {
	return &sandbox.Faults{
		BeforeSnapshotVerify: func(id string) error {
			hangIfArmed(home, "snapshot-hang", id)
			return nil
		},
		BeforeStop: func(id string) error {
			hangIfArmed(home, "before-stop-hang", id)
			return nil
		},
	}
}

// sandboxBlobs wraps the sandbox manager's blob store for the
// snapshot-write-hang failpoint.
func sandboxBlobs(home string, b blob.Store) blob.Store { return hangingBlobs{Store: b, home: home} }

type hangingBlobs struct {
	blob.Store
	home string
}

func (h hangingBlobs) Put(ctx context.Context, key string, r io.Reader) (blob.Info, error) {
	if strings.HasPrefix(key, "backups/") {
		r = &hangAfterFirstRead{r: r, home: h.home, key: key}
	}
	return h.Store.Put(ctx, key, r)
}

// hangAfterFirstRead passes the first Read through (the blob store writes
// it to its temp file) and hangs in the second one when the failpoint is
// armed.
type hangAfterFirstRead struct {
	r        io.Reader
	home     string
	key      string
	readOnce bool
}

func (h *hangAfterFirstRead) Read(p []byte) (int, error) {
	if h.readOnce {
		hangIfArmed(h.home, "snapshot-write-hang", h.key)
	}
	h.readOnce = true
	return h.r.Read(p)
}

// fileFaults is the file-record-hang failpoint: an upload's blob is
// stored and fsynced, its row is not inserted and the client has no
// answer yet.
func fileFaults(home string) func(key string) {
	return func(key string) { hangIfArmed(home, "file-record-hang", key) }
}

// sqliteFaults: <point>-hang hangs inside the SQLite store's transaction
// at a failpoint (sqlite.WithFailpoint): session-migrate-hang in a
// session's move to the one session model, fork-hang and rewind-hang in
// theirs, all before the commit. A flag file that names a session hangs
// only there.
func sqliteFaults(home string) []sqlite.Option {
	return []sqlite.Option{sqlite.WithFailpoint(func(point, what string) {
		want, err := os.ReadFile(filepath.Join(home, "failpoint-"+point+"-hang"))
		if err == nil && len(want) > 0 && strings.TrimSpace(string(want)) != what {
			return
		}
		hangIfArmed(home, point+"-hang", what)
	})}
}

func hangIfArmed(home, name, what string) {
	flag := filepath.Join(home, "failpoint-"+name)
	if _, err := os.Stat(flag); err != nil {
		return
	}
	log.Printf("failpoint %s reached (%s): hanging here", name, what)
	_ = os.WriteFile(flag+".reached", []byte(what), 0o600)
	for {
		time.Sleep(time.Hour)
	}
}

// deploymentFaults hangs the deployment scheduler after it claimed a fire
// and before the run's session exists (deployment-claim-hang).
func deploymentFaults(home string) func(runID string) {
	return func(runID string) { hangIfArmed(home, "deployment-claim-hang", runID) }
}
