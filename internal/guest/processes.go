package guest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// processTable holds background processes. Their output goes straight to
// files in the state dir (no copying goroutine), and one goroutine per
// process records its exit.
type processTable struct {
	s *Server

	mu    sync.Mutex
	next  int
	procs map[string]*bgProcess
	wg    sync.WaitGroup
}

type bgProcess struct {
	info  ProcessInfo // guarded by processTable.mu
	child *child
}

func newProcessTable(s *Server) *processTable {
	return &processTable{s: s, procs: map[string]*bgProcess{}}
}

func (t *processTable) outputPath(id, stream string) string {
	return filepath.Join(t.s.cfg.StateDir, id+"."+stream)
}

func (t *processTable) start(req ExecRequest) (ProcessInfo, error) {
	cmd, err := t.s.command(req)
	if err != nil {
		return ProcessInfo{}, err
	}
	t.mu.Lock()
	t.next++
	id := "p" + strconv.Itoa(t.next)
	t.mu.Unlock()

	stdout, err := os.OpenFile(t.outputPath(id, "stdout"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return ProcessInfo{}, fmt.Errorf("output file: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(t.outputPath(id, "stderr"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return ProcessInfo{}, fmt.Errorf("output file: %w", err)
	}
	defer stderr.Close()

	now := t.s.cfg.Now()
	p := &bgProcess{info: ProcessInfo{ID: id, Argv: cmd.argv, Running: true, StartedAt: now}}
	ch, code, msg, err := t.s.start(cmd, stdout, stderr)
	if err != nil {
		return ProcessInfo{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.procs[id] = p
	if ch == nil { // not found: record it as exited, like a shell would
		_, _ = stderr.WriteString(msg)
		p.info.Running = false
		p.info.ExitCode = &code
		p.info.ExitedAt = &now
		return p.info, nil
	}
	p.child = ch
	p.info.PID = ch.pid
	var timeout <-chan time.Time
	var timer *time.Timer
	if req.TimeoutMS > 0 {
		timer = time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		timeout = timer.C
	}
	t.wg.Add(1)
	go t.watch(p, timeout, timer)
	return p.info, nil
}

// watch waits for the process (killing its group on timeout) and records
// how it ended.
func (t *processTable) watch(p *bgProcess, timeout <-chan time.Time, timer *time.Timer) {
	defer t.wg.Done()
	timedOut := false
	select {
	case <-p.child.done:
	case <-timeout:
		timedOut = true
		killGroup(p.child.pid, sigKill)
		<-p.child.done
	}
	if timer != nil {
		timer.Stop()
	}
	// Leftovers in the group die with the process, as with exec.
	killGroup(p.child.pid, sigKill)
	now := t.s.cfg.Now()
	code := p.child.exitCode()
	t.mu.Lock()
	p.info.Running = false
	p.info.ExitCode = &code
	p.info.ExitedAt = &now
	p.info.TimedOut = timedOut
	t.mu.Unlock()
}

func (t *processTable) get(id string) (ProcessInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.procs[id]
	if !ok {
		return ProcessInfo{}, fmt.Errorf("process %q: %w", id, fs.ErrNotExist)
	}
	return p.info, nil
}

func (t *processTable) list() []ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ProcessInfo, 0, len(t.procs))
	for _, p := range t.procs {
		out = append(out, p.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) || out[i].ID < out[j].ID })
	return out
}

func (t *processTable) kill(id string, sig syscall.Signal) (ProcessInfo, error) {
	t.mu.Lock()
	p, ok := t.procs[id]
	t.mu.Unlock()
	if !ok {
		return ProcessInfo{}, fmt.Errorf("process %q: %w", id, fs.ErrNotExist)
	}
	if p.child != nil {
		select {
		case <-p.child.done:
		default:
			killGroup(p.child.pid, sig)
			if sig == sigKill {
				<-p.child.done
			}
		}
	}
	// The watcher records the exit right after done closes; wait for it so
	// the answer says "not running" after a SIGKILL.
	for i := 0; i < 100; i++ {
		info, _ := t.get(id)
		if !info.Running || sig != sigKill {
			return info, nil
		}
		time.Sleep(time.Millisecond)
	}
	return t.get(id)
}

func (t *processTable) output(req OutputRequest) (OutputChunk, error) {
	info, err := t.get(req.ID)
	if err != nil {
		return OutputChunk{}, err
	}
	stream := req.Stream
	if stream == "" {
		stream = "stdout"
	}
	if stream != "stdout" && stream != "stderr" {
		return OutputChunk{}, fmt.Errorf("%w: stream must be stdout or stderr, got %q", errBadRequest, stream)
	}
	limit := req.Limit
	if limit <= 0 || limit > MaxOutputChunk {
		limit = MaxOutputChunk
	}
	if req.Offset < 0 {
		return OutputChunk{}, fmt.Errorf("%w: negative offset", errBadRequest)
	}
	f, err := os.Open(t.outputPath(req.ID, stream))
	if err != nil {
		return OutputChunk{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return OutputChunk{}, err
	}
	size := fi.Size()
	off := min(req.Offset, size)
	buf := make([]byte, min(limit, size-off))
	n, err := f.ReadAt(buf, off)
	if err != nil && n < len(buf) {
		return OutputChunk{}, err
	}
	next := off + int64(n)
	return OutputChunk{
		Data:       buf[:n],
		Offset:     off,
		NextOffset: next,
		Size:       size,
		EOF:        !info.Running && next >= size,
	}, nil
}

func (t *processTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.child != nil && p.info.Running {
			killGroup(p.child.pid, sigKill)
		}
	}
}

// wait returns once every watcher has recorded its process's exit.
func (t *processTable) wait() { t.wg.Wait() }
