package guest

import (
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
)

// AssignRequest (POST /assign) gives a pooled sandbox to its sandbox. The
// daemon starts pooled guests before it knows whose they will be, with
// nothing of a tenant in them: an empty workspace and runtime dir, the
// environment every sandbox of the pool's shape gets. At assignment it
// moves the sandbox's workspace and runtime dir into the directories the
// pooled sandbox has mounted (host side), then sends this: the
// sandbox's own environment for the commands the guest starts from now
// on.
type AssignRequest struct {
	Env map[string]string `json:"env,omitempty"`
}

// handleAssign makes a pooled guest the sandbox's: its commands get the
// sandbox's environment, records an earlier version left in the workspace
// are moved to the runtime dir (what Serve does at a start), and the guest
// stops dying with the daemon (a pooled sandbox is bound to the daemon's
// life until then, so none outlives a daemon that dies; an assigned one
// outlives it like any other): from now on the end of the daemon's pool
// pipe (Config.PoolPipe) is nothing to it. Once only: a second call is 409.
func (s *Server) handleAssign(w http.ResponseWriter, r *http.Request) {
	var req AssignRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	s.envMu.Lock()
	defer s.envMu.Unlock()
	if s.assigned {
		writeError(w, fmt.Errorf("this sandbox was assigned already: %w", fs.ErrExist))
		return
	}
	if legacy := filepath.Join(s.cfg.WorkDir, runtimeDirName); s.cfg.RuntimeDir != legacy {
		if err := migrateRuntime(legacy, s.cfg.RuntimeDir); err != nil {
			writeError(w, fmt.Errorf("guest: move the runtime's records out of the workspace: %w", err))
			return
		}
	}
	s.cfg.Env = mergeEnv(s.cfg.Env, req.Env)
	s.assigned = true
	if s.cfg.PoolPipe != nil {
		_ = s.cfg.PoolPipe.Close() // ends watchPool
	}
	w.WriteHeader(http.StatusNoContent)
}

// watchPool ends the guest (cancel) when the daemon's end of the pool pipe
// closes before the sandbox was assigned: the daemon that pooled it is
// gone, or it let the sandbox go. Nothing of a tenant was ever in it.
func (s *Server) watchPool(cancel func()) {
	var b [1]byte
	for {
		if _, err := s.cfg.PoolPipe.Read(b[:]); err != nil {
			break
		}
	}
	s.envMu.RLock()
	assigned := s.assigned
	s.envMu.RUnlock()
	if !assigned {
		s.log.Info("guest: the daemon let this pooled sandbox go before assigning it")
		cancel()
	}
}

// baseEnv is the environment of the commands the guest starts.
func (s *Server) baseEnv() []string {
	s.envMu.RLock()
	defer s.envMu.RUnlock()
	return s.cfg.Env
}
