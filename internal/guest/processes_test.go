package guest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitExited polls a background process until it exited.
func waitExited(t *testing.T, c *Client, id string) *ProcessInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Process(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s still running", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBackgroundProcessOutputAndExit(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	info, err := c.StartProcess(ctx, ExecRequest{Shell: `printf 'abcdef'; echo err >&2; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID == "" || info.PID <= 0 {
		t.Fatalf("info = %+v", info)
	}
	done := waitExited(t, c, info.ID)
	if done.ExitCode == nil || *done.ExitCode != 3 || done.ExitedAt == nil {
		t.Fatalf("exited info = %+v, want exit 3", done)
	}
	// Offset-based reads.
	chunk, err := c.ProcessOutput(ctx, OutputRequest{ID: info.ID, Offset: 2, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if string(chunk.Data) != "cde" || chunk.NextOffset != 5 || chunk.Size != 6 || chunk.EOF {
		t.Fatalf("chunk = %+v", chunk)
	}
	chunk, err = c.ProcessOutput(ctx, OutputRequest{ID: info.ID, Offset: chunk.NextOffset})
	if err != nil || string(chunk.Data) != "f" || !chunk.EOF {
		t.Fatalf("chunk = %+v err %v", chunk, err)
	}
	chunk, err = c.ProcessOutput(ctx, OutputRequest{ID: info.ID, Stream: "stderr"})
	if err != nil || string(chunk.Data) != "err\n" {
		t.Fatalf("stderr chunk = %+v err %v", chunk, err)
	}
	list, err := c.ListProcesses(ctx)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("list = %+v err %v", list, err)
	}
}

func TestBackgroundProcessKillGroup(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	info, err := c.StartProcess(ctx, ExecRequest{Shell: `sleep 100 & echo $!; sleep 100`})
	if err != nil {
		t.Fatal(err)
	}
	var pid string
	for deadline := time.Now().Add(10 * time.Second); pid == ""; {
		chunk, err := c.ProcessOutput(ctx, OutputRequest{ID: info.ID})
		if err != nil {
			t.Fatal(err)
		}
		pid = string(chunk.Data)
		if time.Now().After(deadline) {
			t.Fatal("no output")
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed, err := c.KillProcess(ctx, info.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if killed.Running || killed.ExitCode == nil || *killed.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("after kill: %+v", killed)
	}
	assertGone(t, pid)
}

func TestBackgroundProcessTimeoutAndNotFound(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	info, err := c.StartProcess(ctx, ExecRequest{Argv: []string{"sleep", "100"}, TimeoutMS: 100})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitExited(t, c, info.ID); !done.TimedOut {
		t.Fatalf("info = %+v, want timed out", done)
	}
	info, err = c.StartProcess(ctx, ExecRequest{Argv: []string{"no-such-binary-xyz"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Running || info.ExitCode == nil || *info.ExitCode != 127 {
		t.Fatalf("info = %+v, want exited 127", info)
	}
	if _, err := c.Process(ctx, "p999"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}

// Shutting the guest down kills background processes.
func TestShutdownKillsBackgroundProcesses(t *testing.T) {
	var pid string
	t.Run("serve", func(t *testing.T) {
		c, work := startGuest(t, nil)
		if _, err := c.StartProcess(context.Background(), ExecRequest{Shell: `sleep 100 & echo $! > pid; wait`}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			b, _ := os.ReadFile(work + "/pid")
			if strings.HasSuffix(string(b), "\n") {
				pid = string(b)
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no pid file")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}) // cleanup stops the guest here
	assertGone(t, pid)
}
