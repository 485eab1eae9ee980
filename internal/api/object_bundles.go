package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

// bundleJSON describes a class's bundle; Files and Bytes (what it unpacked
// to) are known in the answer to the upload.
type bundleJSON struct {
	Type       string    `json:"type"`
	Class      string    `json:"class"`
	SHA256     string    `json:"sha256"`
	Size       int64     `json:"size"`
	Files      int64     `json:"files,omitempty"`
	Bytes      int64     `json:"bytes,omitempty"`
	UploadedAt time.Time `json:"uploaded_at"`
}

func toBundleJSON(b *object.BundleInfo) *bundleJSON {
	return &bundleJSON{Type: "object_bundle", Class: b.Class, SHA256: b.SHA256, Size: b.Size, Files: b.Files, Bytes: b.Bytes, UploadedAt: b.UploadedAt}
}

func (s *Server) registerBundleRoutes() {
	a := s.authenticated
	s.mux.HandleFunc("PUT /v1/objects/definitions/{class}/bundle", a(s.putObjectBundle))
	s.mux.HandleFunc("GET /v1/objects/definitions/{class}/bundle", a(s.noQuery(s.getObjectBundle)))
	s.mux.HandleFunc("DELETE /v1/objects/definitions/{class}/bundle", a(s.deleteObjectBundle))
}

// isBundleUpload says whether r uploads a bundle, whose body limit is
// durable_objects.max_bundle_bytes (enforced by the runtime, naming it)
// instead of server.max_body_bytes.
func isBundleUpload(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/objects/definitions/") && strings.HasSuffix(r.URL.Path, "/bundle")
}

func (s *Server) putObjectBundle(w http.ResponseWriter, r *http.Request) {
	class := r.PathValue("class")
	if max := s.objects.MaxBundleBytes(); r.ContentLength > max {
		s.writeError(w, r, objectError(store.ObjectKey{}, &object.LimitError{Limit: "durable_objects.max_bundle_bytes", Max: max,
			Got: r.ContentLength, What: "bundle size in bytes", TooLarge: true}))
		return
	}
	in, err := s.objects.PutBundle(r.Context(), PrincipalFrom(r.Context()).TenantID, class, r.Body)
	if err != nil {
		s.writeError(w, r, objectError(store.ObjectKey{}, err))
		return
	}
	writeJSON(w, http.StatusCreated, toBundleJSON(in))
}

func (s *Server) getObjectBundle(w http.ResponseWriter, r *http.Request) {
	in, err := s.objects.Bundle(r.Context(), PrincipalFrom(r.Context()).TenantID, r.PathValue("class"))
	if err != nil {
		s.writeError(w, r, objectError(store.ObjectKey{}, err))
		return
	}
	writeJSON(w, http.StatusOK, toBundleJSON(in))
}

func (s *Server) deleteObjectBundle(w http.ResponseWriter, r *http.Request) {
	class := r.PathValue("class")
	if err := s.objects.DeleteBundle(r.Context(), PrincipalFrom(r.Context()).TenantID, class); err != nil {
		s.writeError(w, r, objectError(store.ObjectKey{}, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "object_bundle_deleted", "class": class, "deleted": true})
}

// bundleError maps the bundle errors objectError does not know.
func bundleError(err error) (error, bool) {
	var be *object.BundleError
	switch {
	case errors.As(err, &be):
		return BadRequest("%s", be.Error()), true
	case errors.Is(err, object.ErrNoBundle):
		return Errorf(http.StatusNotFound, TypeNotFound, "%s", err.Error()), true
	}
	return err, false
}
