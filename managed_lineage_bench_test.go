package agentkernel_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// BenchmarkForkAfterHundredTurns measures fork and rewind on a session
// whose workspace is large and changes a little every turn, end to end
// through the daemon: a first turn fills /workspace with MB files of 1 MiB
// of random data (AGENTKERNEL_BENCH_WORKSPACE_MB, default 1024), then each
// of TURNS turns (AGENTKERNEL_BENCH_TURNS, default 100) rewrites one of
// them (1 MiB changed). Every turn's end is a checkpoint with a workspace
// snapshot. It reports the bytes the snapshots take against one full copy
// plus the changes, the time of one turn, the fork's latency (the API
// call), and the time the fork's first tool call takes to restore the
// workspace. Not part of the test suite (it writes a few GB):
//
//	go test -run '^$' -bench ForkAfterHundredTurns -benchtime 1x -timeout 30m .
func BenchmarkForkAfterHundredTurns(b *testing.B) {
	mb := envInt("AGENTKERNEL_BENCH_WORKSPACE_MB", 1024)
	turns := envInt("AGENTKERNEL_BENCH_TURNS", 100)
	var turn atomic.Int64
	fake := anthropictest.New(b, func(r anthropictest.Request) anthropictest.Turn {
		text, steps := lastTextAndSteps(r)
		switch {
		case steps > 0:
			return anthropictest.Turn{Text: "ok"}
		case text == "fill":
			return bash(fmt.Sprintf("for i in $(seq 0 %d); do head -c 1048576 /dev/urandom > f$i; done; du -sm /workspace", mb-1))
		case text == "look":
			return bash("ls /workspace | wc -l")
		}
		n := turn.Add(1)
		return bash(fmt.Sprintf("head -c 1048576 /dev/urandom > f%d", n%int64(mb)))
	})
	d := daemontest.Start(b, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
		c.Sandbox.MemoryMB = 2048
	})
	le := lineageOn(b, d)
	sid := le.session()
	start := time.Now()
	le.say(sid, "fill")
	b.Logf("filled a %d MiB workspace and snapshotted it in %v", mb, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	for i := range turns {
		le.say(sid, "change "+strconv.Itoa(i))
	}
	perTurn := time.Since(start) / time.Duration(turns)
	stored := dirBytes(b, filepath.Join(d.Config.BlobPath(), "wsnap"))
	changes := int64(turns) << 20
	ratio := float64(stored) / float64(int64(mb)<<20+changes)

	b.ResetTimer()
	var forks []string
	for range b.N {
		f, err := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey)).Sessions.Fork(context.Background(), sid, "")
		if err != nil {
			b.Fatal(err)
		}
		forks = append(forks, f.ID)
	}
	b.StopTimer()
	start = time.Now()
	got := le.say(forks[0], "look")
	restore := time.Since(start)
	if strings.TrimSpace(got) != strconv.Itoa(mb) {
		b.Fatalf("the fork's workspace holds %q files, want %d", got, mb)
	}
	b.ReportMetric(float64(stored)/(1<<20), "MiB-stored")
	b.ReportMetric(ratio, "x-copy+changes")
	b.ReportMetric(float64(perTurn.Microseconds())/1000, "ms/turn")
	b.ReportMetric(float64(restore.Milliseconds()), "ms-first-tool-call-on-fork")
	b.Logf("workspace %d MiB, %d turns of 1 MiB: snapshots take %d MiB (%.3f× one copy + the changes), %v per turn; fork's first tool call (restores the workspace) %v",
		mb, turns, stored>>20, ratio, perTurn, restore.Round(time.Millisecond))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// dirBytes sums the sizes of the files below dir.
func dirBytes(tb testing.TB, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
