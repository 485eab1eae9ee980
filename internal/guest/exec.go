package guest

import (
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"time"
)

// drainGrace bounds how long output is still read after a command exited
// and its group was killed: only a process that left the group (setsid)
// can keep the pipes open that long.
const drainGrace = 2 * time.Second

func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req ExecRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.OpID != "" {
		if err := validOpID(req.OpID); err != nil {
			writeError(w, err)
			return
		}
	}
	cmd, err := s.command(req)
	if err != nil {
		writeError(w, err)
		return
	}
	// A journalled op is recorded as accepted before anything can start.
	var rec *opRun
	if req.OpID != "" {
		if err := s.ops.accept(req.OpID, cmd); err != nil {
			writeError(w, err)
			return
		}
		rec = &opRun{id: req.OpID, ops: s.ops, now: s.cfg.Now}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		rec.abandon()
		writeError(w, err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		rec.abandon()
		writeError(w, err)
		return
	}
	begin := time.Now()
	ch, code, msg, err := s.start(cmd, outW, errW)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		rec.abandon()
		writeError(w, err)
		return
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	clientGone := false
	send := func(f ExecFrame) {
		rec.capture(f)
		if clientGone {
			return
		}
		_ = enc.Encode(f)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if ch == nil { // not found / not executable: a shell-style exit code
		outR.Close()
		errR.Close()
		send(ExecFrame{Stream: "stderr", Data: []byte(msg)})
		end := ExecFrame{ExitCode: &code, DurationMS: time.Since(begin).Milliseconds()}
		rec.finish(end)
		send(end)
		return
	}
	s.trackExec(ch.pid, true)
	defer s.trackExec(ch.pid, false)

	frames := make(chan ExecFrame)
	quit := make(chan struct{})
	var pumps sync.WaitGroup
	pumps.Add(2)
	go pump(&pumps, outR, "stdout", frames, quit)
	go pump(&pumps, errR, "stderr", frames, quit)
	pumpsDone := make(chan struct{})
	go func() { pumps.Wait(); close(pumpsDone) }()
	// Whatever happens, the readers are closed and the pumps stopped before
	// the handler returns.
	defer func() {
		close(quit)
		outR.Close()
		errR.Close()
		<-pumpsDone
	}()

	var timeout <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var grace <-chan time.Time
	pumpsDoneC := pumpsDone
	clientDone := r.Context().Done()
	exited, drained, timedOut := false, false, false
	for !exited || !drained {
		select {
		case f := <-frames:
			send(f)
		case <-pumpsDoneC:
			drained = true
			pumpsDoneC = nil
		case <-ch.done:
			exited = true
			ch.done = nil
			// Leftovers in the group die with the command.
			killGroup(ch.pid, sigKill)
			grace = time.After(drainGrace)
		case <-grace:
			outR.Close()
			errR.Close()
		case <-timeout:
			timedOut = true
			killGroup(ch.pid, sigKill)
		case <-clientDone:
			if rec == nil {
				// Nobody reads the result.
				killGroup(ch.pid, sigKill)
				s.log.Info("exec cancelled by client", "pid", ch.pid)
				return
			}
			// A journalled op runs on so that its result is recorded:
			// recovery reattaches through GET /ops/{op_id}.
			clientGone, clientDone = true, nil
			s.log.Info("exec client went away; op runs on", "pid", ch.pid, "op_id", rec.id)
		}
	}
	exit := ch.exitCode()
	end := ExecFrame{ExitCode: &exit, DurationMS: time.Since(begin).Milliseconds(), TimedOut: timedOut}
	// The result is durable before the client hears the command ended.
	rec.finish(end)
	send(end)
}

// pump forwards chunks read from f as frames until EOF or quit.
func pump(wg *sync.WaitGroup, f *os.File, stream string, frames chan<- ExecFrame, quit <-chan struct{}) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			data := make([]byte, n)
			copy(data, buf[:n])
			select {
			case frames <- ExecFrame{Stream: stream, Data: data}:
			case <-quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}
