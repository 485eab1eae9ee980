package guest

import (
	"fmt"
	"net/http"
	"strconv"
	"syscall"
)

func (s *Server) handleStartProcess(w http.ResponseWriter, r *http.Request) {
	var req ExecRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.OpID != "" {
		writeError(w, fmt.Errorf("%w: op_id is only taken by POST /exec", errBadRequest))
		return
	}
	info, err := s.procs.start(req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

func (s *Server) handleListProcesses(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.procs.list())
}

func (s *Server) handleGetProcess(w http.ResponseWriter, r *http.Request) {
	info, err := s.procs.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleProcessOutput(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := OutputRequest{ID: r.PathValue("id"), Stream: q.Get("stream")}
	var err error
	if v := q.Get("offset"); v != "" {
		if req.Offset, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeError(w, fmt.Errorf("%w: offset: %v", errBadRequest, err))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if req.Limit, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeError(w, fmt.Errorf("%w: limit: %v", errBadRequest, err))
			return
		}
	}
	chunk, err := s.procs.output(req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, chunk)
}

func (s *Server) handleKillProcess(w http.ResponseWriter, r *http.Request) {
	var req KillRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	sig := syscall.Signal(req.Signal)
	if req.Signal == 0 {
		sig = sigKill
	}
	if sig < 1 || sig > 64 {
		writeError(w, fmt.Errorf("%w: signal %d out of range 1..64", errBadRequest, req.Signal))
		return
	}
	info, err := s.procs.kill(r.PathValue("id"), sig)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}
