package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/internal/guest"
)

// maxExecOutput bounds the output a non-streaming exec collects per stream;
// beyond it the answer says the output was truncated. Streaming has no
// bound.
const maxExecOutput = 16 << 20

type execRequest struct {
	Command    string            `json:"command"`
	Argv       []string          `json:"argv"`
	Env        map[string]string `json:"env"`
	Cwd        string            `json:"cwd"`
	TimeoutMS  int64             `json:"timeout_ms"`
	Background bool              `json:"background"`
}

func (in *execRequest) validate() error {
	switch {
	case in.Command == "" && len(in.Argv) == 0:
		return BadRequest("one of the fields \"command\" or \"argv\" is required")
	case in.Command != "" && len(in.Argv) > 0:
		return BadRequest("fields \"command\" and \"argv\" are exclusive; send one")
	case in.TimeoutMS < 0:
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"timeout_ms\" must not be negative")
	case len(in.Argv) > 0 && in.Argv[0] == "":
		return BadRequest("field \"argv\": the first element (the program) must not be empty")
	}
	return nil
}

func (s *Server) execSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tenant := PrincipalFrom(r.Context()).TenantID
	var in execRequest
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := in.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	req := guest.ExecRequest{Argv: in.Argv, Shell: in.Command, Env: in.Env, Cwd: in.Cwd, TimeoutMS: in.TimeoutMS}
	if in.Background {
		p, err := s.sandboxes.StartProcess(r.Context(), tenant, id, req)
		if err != nil {
			s.writeError(w, r, sandboxError(id, err))
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"process_id": p.ID, "pid": p.PID, "started_at": p.StartedAt})
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.execStream(w, r, id, tenant, req)
		return
	}
	var stdout, stderr limitedBuffer
	res, err := s.sandboxes.Exec(r.Context(), tenant, id, req, func(stream string, data []byte) {
		if stream == "stderr" {
			stderr.Write(data)
		} else {
			stdout.Write(data)
		}
	})
	if err != nil {
		s.writeError(w, r, sandboxError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"exit_code": res.ExitCode, "stdout": stdout.String(), "stderr": stderr.String(),
		"duration_ms": res.DurationMS, "timed_out": res.TimedOut,
		"truncated": stdout.truncated || stderr.truncated,
	})
}

// execStream answers with SSE: `stdout` and `stderr` events as output
// arrives, then one `exit` event (or `error`).
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, id, tenant string, req guest.ExecRequest) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, Errorf(http.StatusNotAcceptable, TypeInvalidRequest, "streaming is not supported on this connection"))
		return
	}
	var mu sync.Mutex
	started := false
	start := func() {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		flusher.Flush()
	}
	res, err := s.sandboxes.Exec(r.Context(), tenant, id, req, func(stream string, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		start()
		send(stream, outputChunk(data))
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if !started {
			s.writeError(w, r, sandboxError(id, err))
			return
		}
		var ae *Error
		e := sandboxError(id, err)
		msg := e.Error()
		if errors.As(e, &ae) {
			msg = ae.Message
		}
		send("error", map[string]string{"message": msg})
		return
	}
	start()
	send("exit", map[string]any{"exit_code": res.ExitCode, "duration_ms": res.DurationMS, "timed_out": res.TimedOut})
}

// outputChunk carries bytes as text when they are valid UTF-8, else base64.
func outputChunk(b []byte) map[string]string {
	if utf8.Valid(b) {
		return map[string]string{"data": string(b)}
	}
	return map[string]string{"data_b64": base64.StdEncoding.EncodeToString(b)}
}

type limitedBuffer struct {
	strings.Builder
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) {
	if room := maxExecOutput - b.Len(); room < len(p) {
		p = p[:max(room, 0)]
		b.truncated = true
	}
	b.Builder.Write(p)
}
