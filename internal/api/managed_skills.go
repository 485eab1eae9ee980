package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel/internal/skills"
	"github.com/agentkernel/agentkernel/internal/store"
)

// skillAPI serves /v1/skills and their versions (the SDK's Beta.Skills).
type skillAPI struct {
	*managedAPI
	svc *skills.Service
}

func (s *Server) registerSkillRoutes(m *managedAPI, svc *skills.Service) {
	k := &skillAPI{managedAPI: m, svc: svc}
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/skills", a(s.noQuery(k.createSkill)))
	s.mux.HandleFunc("GET /v1/skills", a(s.query(k.listSkills, "limit", "page", "source")))
	s.mux.HandleFunc("GET /v1/skills/{id}", a(s.noQuery(k.getSkill)))
	s.mux.HandleFunc("DELETE /v1/skills/{id}", a(s.noQuery(k.deleteSkill)))
	s.mux.HandleFunc("POST /v1/skills/{id}/versions", a(s.noQuery(k.createVersion)))
	s.mux.HandleFunc("GET /v1/skills/{id}/versions", a(s.query(k.listVersions, "limit", "page")))
	// A self_hosted environment's worker downloads its sessions' skills
	// with the environment's key (read only).
	s.mux.HandleFunc("GET /v1/skills/{id}/versions/{version}", s.envAuthenticated(s.noQuery(k.getVersion)))
	s.mux.HandleFunc("DELETE /v1/skills/{id}/versions/{version}", a(s.noQuery(k.deleteVersion)))
	s.mux.HandleFunc("GET /v1/skills/{id}/versions/{version}/content", s.envAuthenticated(s.noQuery(k.downloadVersion)))
}

// isSkillUpload tells the body limit that a request is a skill upload
// (held to skills.max_upload_bytes, not server.max_body_bytes).
func isSkillUpload(r *http.Request) bool {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/skills") {
		return false
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/skills")
	return rest == "" || (strings.HasSuffix(rest, "/versions") && strings.Count(rest, "/") == 2)
}

// multipartSlack is what multipart framing may add to an upload's parts.
const multipartSlack = 1 << 20

// skillErr maps the skills package's refusals to 4xx and the store's
// ErrNotFound to a 404 naming the skill.
func skillErr(kind, id string, err error) error {
	var ie *skills.InputError
	if errors.As(err, &ie) {
		typ := TypeInvalidRequest
		if ie.Status == http.StatusRequestEntityTooLarge {
			typ = TypeRequestTooLarge
		}
		return Errorf(ie.Status, typ, "%s", ie.Msg)
	}
	return notFoundAs(kind, id, err)
}

// readUpload reads the multipart form the SDK sends (BetaSkillNewParams:
// one "files" part per file — "files[]" as its encoder names an array —
// with the file's path in the skill as its filename, and display_name).
// Parts are read into memory up to skills.max_upload_bytes in all.
func (k *skillAPI) readUpload(r *http.Request, allowName bool) ([]skills.Part, string, error) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" {
		return nil, "", BadRequest("a skill upload is multipart/form-data with a \"files\" field, got Content-Type %q", r.Header.Get("Content-Type"))
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, "", BadRequest("the multipart body cannot be read: %v", err)
	}
	limit := k.svc.Limits().UploadBytes
	var (
		parts   []skills.Part
		name    string
		hasName bool
		total   int64
	)
	tooLarge := func() error {
		return Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge, "the upload is over the limit of %d bytes (skills.max_upload_bytes)", limit)
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, "", tooLarge()
		}
		if err != nil {
			return nil, "", BadRequest("the multipart body is malformed: %v", err)
		}
		data, err := io.ReadAll(io.LimitReader(p, limit-total+1))
		if errors.As(err, &mbe) {
			return nil, "", tooLarge()
		}
		if err != nil {
			return nil, "", BadRequest("the multipart body is malformed: %v", err)
		}
		total += int64(len(data))
		if total > limit {
			return nil, "", tooLarge()
		}
		switch field := p.FormName(); field {
		case "files", "files[]":
			parts = append(parts, skills.Part{Name: rawFilename(p.Header.Get("Content-Disposition")), Data: data})
		case "display_name":
			if !allowName {
				return nil, "", BadRequest("unknown field %q: a version takes only \"files\"; the display name belongs to the skill", field)
			}
			name, hasName = string(data), true
		default:
			return nil, "", BadRequest("unknown field %q (accepted: files%s)", field, map[bool]string{true: ", display_name"}[allowName])
		}
	}
	if hasName {
		if name == "" || strings.ContainsAny(name, "\r\n") || len([]rune(name)) > maxDisplayName {
			return nil, "", BadRequest("field \"display_name\" must be one line of 1 to %d characters", maxDisplayName)
		}
	}
	return parts, name, nil
}

// rawFilename is a part's filename as sent: multipart.Part.FileName keeps
// only its last element, and a skill's files are paths.
func rawFilename(cd string) string {
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		return ""
	}
	return params["filename"]
}

func skillJSON(x *store.Skill) map[string]any {
	return map[string]any{
		"id": x.ID, "type": "skill", "display_name": x.DisplayName, "latest_version_id": x.LatestVersion,
		"source": map[string]string{"type": "custom"}, "created_at": timeJSON(x.CreatedAt), "updated_at": timeJSON(x.UpdatedAt),
	}
}

func skillVersionJSON(v *store.SkillVersion) map[string]any {
	return map[string]any{
		"id": v.Version, "type": "skill_version", "skill_id": v.SkillID, "name": v.Name, "description": v.Description,
		"created_at": timeJSON(v.CreatedAt),
	}
}

func (k *skillAPI) createSkill(w http.ResponseWriter, r *http.Request) {
	parts, name, err := k.readUpload(r, true)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	sk, _, err := k.svc.Create(r.Context(), tenant(r), name, parts)
	if err != nil {
		k.writeError(w, r, skillErr("skill", "", err))
		return
	}
	writeJSON(w, http.StatusOK, skillJSON(sk))
}

func (k *skillAPI) getSkill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sk, err := k.svc.Get(r.Context(), tenant(r), id)
	if err != nil {
		k.writeError(w, r, skillErr("skill", id, err))
		return
	}
	writeJSON(w, http.StatusOK, skillJSON(sk))
}

func (k *skillAPI) listSkills(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	source := q.Get("source")
	switch source {
	case "", "custom":
	case "anthropic", "anthropic_example", "plugin":
		// agentkernel holds only the tenant's own skills.
		writePage(w, []map[string]any{}, false, func(map[string]any) string { return "" })
		return
	default:
		k.writeError(w, r, BadRequest("query parameter \"source\" must be custom, anthropic, anthropic_example or plugin, got %q", source))
		return
	}
	p, err := parsePageQuery(q, 20, 100, false)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.Skill, error) {
		return k.svc.List(r.Context(), store.ListResourcesParams{TenantID: tenant(r), Limit: n, AfterID: after})
	}, func(x *store.Skill) string { return x.ID }, func(*store.Skill) bool { return true })
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, x := range page {
		out = append(out, skillJSON(x))
	}
	writePage(w, out, more, func(m map[string]any) string { return m["id"].(string) })
}

func (k *skillAPI) deleteSkill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := k.svc.Delete(r.Context(), tenant(r), id); err != nil {
		k.writeError(w, r, skillErr("skill", id, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "skill_deleted"})
}

func (k *skillAPI) createVersion(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := k.svc.Get(r.Context(), tenant(r), id); err != nil {
		k.writeError(w, r, skillErr("skill", id, err))
		return
	}
	parts, _, err := k.readUpload(r, false)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	v, err := k.svc.AddVersion(r.Context(), tenant(r), id, parts)
	if err != nil {
		k.writeError(w, r, skillErr("skill", id, err))
		return
	}
	writeJSON(w, http.StatusOK, skillVersionJSON(v))
}

// versionFor reads a version of the caller's skill, with a 404 that says
// which of the two is missing.
func (k *skillAPI) versionFor(r *http.Request) (*store.SkillVersion, error) {
	id, ver := r.PathValue("id"), r.PathValue("version")
	if _, err := k.svc.Get(r.Context(), tenant(r), id); err != nil {
		return nil, skillErr("skill", id, err)
	}
	v, err := k.svc.Version(r.Context(), tenant(r), id, ver)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(http.StatusNotFound, TypeNotFound, "skill %q has no version %q", id, ver)
	}
	return v, err
}

func (k *skillAPI) getVersion(w http.ResponseWriter, r *http.Request) {
	v, err := k.versionFor(r)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, skillVersionJSON(v))
}

func (k *skillAPI) listVersions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := parsePageQuery(r.URL.Query(), 20, 100, true)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.SkillVersion, error) {
		return k.svc.Versions(r.Context(), tenant(r), id, after, n)
	}, func(v *store.SkillVersion) string { return v.Version }, func(*store.SkillVersion) bool { return true })
	if err != nil {
		k.writeError(w, r, skillErr("skill", id, err))
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, v := range page {
		out = append(out, skillVersionJSON(v))
	}
	writePage(w, out, more, func(m map[string]any) string { return m["id"].(string) })
}

func (k *skillAPI) deleteVersion(w http.ResponseWriter, r *http.Request) {
	v, err := k.versionFor(r)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	if err := k.svc.DeleteVersion(r.Context(), tenant(r), v.SkillID, v.Version); err != nil {
		k.writeError(w, r, skillErr("skill", v.SkillID, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": v.Version, "type": "skill_version_deleted"})
}

// downloadVersion streams the version's archive: a zip of the skill's
// directory, as the SDK's skill extractor reads it.
func (k *skillAPI) downloadVersion(w http.ResponseWriter, r *http.Request) {
	v, err := k.versionFor(r)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	rc, v, err := k.svc.Open(r.Context(), tenant(r), v.SkillID, v.Version)
	if err != nil {
		k.writeError(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Length", strconv.FormatInt(v.Size, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": v.Directory + ".zip"}))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		k.log.WarnContext(r.Context(), "skill download", "skill", v.SkillID, "version", v.Version, "err", err)
	}
}
