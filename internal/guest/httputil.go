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
	status, code := errorStatus(err)
	writeJSON(w, status, errorBody{Error: err.Error(), Code: code})
}

// errorStatus maps an error to its HTTP status and code. Every errno a
// file operation can meet on a caller's path is a 4xx (or 507 for a full
// disk); only what is the guest's own fault is a 500.
func errorStatus(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest, codeBadRequest
	case errors.Is(err, ErrEscapesWorkspace):
		return http.StatusBadRequest, codeEscapesWorkspace
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, codeNotFound
	case errors.Is(err, syscall.ENOTEMPTY): // before ErrExist, which it also matches
		return http.StatusConflict, codeNotEmpty
	case errors.Is(err, fs.ErrExist):
		return http.StatusConflict, codeExists
	case errors.Is(err, syscall.ENOTDIR):
		return http.StatusConflict, codeNotDir
	case errors.Is(err, syscall.EISDIR):
		return http.StatusConflict, codeIsDir
	case errors.Is(err, syscall.EROFS):
		return http.StatusForbidden, codeReadOnly
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden, codePermission
	case errors.Is(err, syscall.ENAMETOOLONG):
		return http.StatusBadRequest, codeNameTooLong
	case errors.Is(err, syscall.ELOOP):
		return http.StatusBadRequest, codeSymlinkLoop
	case errors.Is(err, errNotRegular), errors.Is(err, syscall.ENXIO):
		return http.StatusBadRequest, codeNotRegular
	case errors.Is(err, syscall.EINVAL):
		return http.StatusBadRequest, codeBadRequest
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ETXTBSY):
		return http.StatusConflict, codeBusy
	case errors.Is(err, syscall.EFBIG), errors.As(err, &mbe), errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, codeTooLarge
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage, codeNoSpace
	}
	return http.StatusInternalServerError, codeInternal
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err := dec.Decode(v); err != nil {
		return errors.Join(errBadRequest, err)
	}
	return nil
}
