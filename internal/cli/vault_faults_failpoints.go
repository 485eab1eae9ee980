//go:build failpoints

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// rekeyHook (crash-test builds only): while $home/failpoint-rekey-hang
// exists, the rotation writes $home/failpoint-rekey-hang.reached after its
// first re-encrypted credential and hangs there, so a test can SIGKILL it
// halfway through.
func rekeyHook(home string) func(int) {
	flag := filepath.Join(home, "failpoint-rekey-hang")
	return func(done int) {
		if _, err := os.Stat(flag); err != nil {
			return
		}
		_ = os.WriteFile(flag+".reached", []byte(fmt.Sprint(done)), 0o600)
		for {
			time.Sleep(time.Hour)
		}
	}
}
