//go:build failpoints

package daemon

import (
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// sandboxFaults (crash-test builds only): while the file
// $home/failpoint-snapshot-hang exists, a snapshot hangs after its blob is
// written and before it is verified, so a test can SIGKILL the daemon there.
func sandboxFaults(home string) *sandbox.Faults {
	flag := filepath.Join(home, "failpoint-snapshot-hang")
	return &sandbox.Faults{
		BeforeSnapshotVerify: func(id string) error {
			if _, err := os.Stat(flag); err != nil {
				return nil
			}
			log.Printf("failpoint: snapshot of %s hangs before verify", id)
			_ = os.WriteFile(flag+".reached", []byte(id), 0o600)
			for {
				time.Sleep(time.Hour)
			}
		},
	}
}
