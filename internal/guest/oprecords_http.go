package guest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// maxOpWait bounds one long poll of GET /ops/{op_id}?wait_ms=N.
const maxOpWait = 5 * time.Minute

// handleGetOp answers GET /ops/{op_id}. With wait_ms it waits (up to that
// long) for a running op to end, so recovery can reattach to it without
// polling.
func (s *Server) handleGetOp(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("op_id")
	if err := validOpID(id); err != nil {
		writeError(w, err)
		return
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			writeError(w, fmt.Errorf("%w: wait_ms %q is not a non-negative integer", errBadRequest, v))
			return
		}
		wait = min(time.Duration(ms)*time.Millisecond, maxOpWait)
	}
	st, running, err := s.ops.status(id)
	if err != nil {
		writeError(w, err)
		return
	}
	if running != nil && wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-running:
			st, _, err = s.ops.status(id)
			if err != nil {
				writeError(w, err)
				return
			}
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, http.StatusOK, st)
}
