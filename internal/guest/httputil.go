package guest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"syscall"
)

const sigKill = syscall.SIGKILL

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError maps err to a status and code.
func writeError(w http.ResponseWriter, err error) {
	if oc := (*opConflict)(nil); errors.As(err, &oc) {
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error(), Code: codeOpExists, Op: &oc.status})
		return
	}
	status, code := http.StatusInternalServerError, codeInternal
	switch {
	case errors.Is(err, errBadRequest):
		status, code = http.StatusBadRequest, codeBadRequest
	case errors.Is(err, ErrEscapesWorkspace):
		status, code = http.StatusBadRequest, codeEscapesWorkspace
	case errors.Is(err, fs.ErrNotExist):
		status, code = http.StatusNotFound, codeNotFound
	case errors.Is(err, syscall.ENOTEMPTY): // before ErrExist, which it also matches
		status, code = http.StatusConflict, codeNotEmpty
	case errors.Is(err, fs.ErrExist):
		status, code = http.StatusConflict, codeExists
	case errors.Is(err, syscall.ENOTDIR):
		status, code = http.StatusConflict, codeNotDir
	case errors.Is(err, syscall.EISDIR):
		status, code = http.StatusConflict, codeIsDir
	case errors.Is(err, fs.ErrPermission):
		status, code = http.StatusForbidden, codeBadRequest
	}
	writeJSON(w, status, errorBody{Error: err.Error(), Code: code})
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err := dec.Decode(v); err != nil {
		return errors.Join(errBadRequest, err)
	}
	return nil
}
