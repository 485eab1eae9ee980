package guest

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reaper does all waiting for child processes. Starting a child and
// registering its pid happen under the same lock the reaper holds while it
// calls wait4, so the reaper can never collect a child before its waiter is
// registered. In reapAll mode (PID 1) it collects every child, including
// orphans re-parented to the guest, and drops the statuses nobody waits for.
type reaper struct {
	reapAll bool

	mu      sync.Mutex
	waiters map[int]*child

	sigs chan os.Signal
	stop chan struct{}
	done chan struct{}
}

// child is a process started by the guest; done closes once it was reaped.
type child struct {
	pid    int
	done   chan struct{}
	status syscall.WaitStatus
}

// exitCode maps a wait status to a shell-style exit code.
func (c *child) exitCode() int {
	switch {
	case c.status.Exited():
		return c.status.ExitStatus()
	case c.status.Signaled():
		return 128 + int(c.status.Signal())
	default:
		return -1
	}
}

func newReaper(reapAll bool) *reaper {
	return &reaper{
		reapAll: reapAll,
		waiters: map[int]*child{},
		sigs:    make(chan os.Signal, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (r *reaper) start() {
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
}

// close stops the loop; children still registered are not waited for.
func (r *reaper) close() {
	signal.Stop(r.sigs)
	close(r.stop)
	<-r.done
}

func (r *reaper) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.sigs:
			r.reap()
		}
	}
}

// spawn starts a process in its own process group and registers it.
func (r *reaper) spawn(argv0 string, argv []string, attr *syscall.ProcAttr) (*child, error) {
	if attr.Sys == nil {
		attr.Sys = &syscall.SysProcAttr{}
	}
	attr.Sys.Setpgid = true
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(argv0, argv, attr)
	if err != nil {
		return nil, err
	}
	c := &child{pid: pid, done: make(chan struct{})}
	r.waiters[pid] = c
	return c, nil
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reapAll {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				return
			}
			r.deliver(pid, ws)
		}
	}
	for pid := range r.waiters {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err == nil && got == pid {
			r.deliver(pid, ws)
		}
	}
}

// deliver hands a status to its waiter; statuses of orphans are dropped.
func (r *reaper) deliver(pid int, ws syscall.WaitStatus) {
	if ws.Stopped() || ws.Continued() {
		return
	}
	c, ok := r.waiters[pid]
	if !ok {
		return
	}
	delete(r.waiters, pid)
	c.status = ws
	close(c.done)
}

// killGroup signals a child's whole process group (its pgid is its pid).
func killGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}
