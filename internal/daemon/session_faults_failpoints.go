//go:build failpoints

package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// failpointHook (crash-test builds only): while the file
// $home/failpoint-<name> exists, a turn that reaches the session failpoint
// <name> (session.Failpoints), an alarm delivery that reaches the object
// failpoint <name> (object.Fail*), or a session resources step that reaches
// <name> (resources.Fail*), writes $home/failpoint-<name>.reached and
// hangs, so a test can SIGKILL the daemon exactly there. A flag that says
// "pause" holds it only until the test removes the flag: the daemon goes
// on from there (a test changes the world meanwhile, as a partition does).
func failpointHook(home string, log *slog.Logger) func(string) {
	return func(name string) {
		flag := filepath.Join(home, "failpoint-"+name)
		if _, err := os.Stat(flag); err != nil {
			return
		}
		mode, _ := os.ReadFile(flag)
		log.Warn("failpoint reached; hanging here", "failpoint", name, "mode", string(mode))
		_ = os.WriteFile(flag+".reached", []byte(name), 0o600)
		if string(mode) == "pause" {
			for {
				if _, err := os.Stat(flag); err != nil {
					log.Warn("failpoint released", "failpoint", name)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		for {
			time.Sleep(time.Hour)
		}
	}
}
