package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/store"
)

// memoryAPI serves /v1/memory_stores, their memories and memory versions
// (the SDK's Beta.MemoryStores, .Memories, .MemoryVersions).
type memoryAPI struct {
	*managedAPI
	mem *memory.Service
	st  store.MemoryStores
}

const (
	maxMemStoreName = 255
	maxMemStoreDesc = 1024
	// fullViewLimit caps a page with view=full (the SDK: "with full, a
	// page holds at most 20 items").
	fullViewLimit = 20
)

func (s *Server) registerMemoryRoutes(m *managedAPI, mem *memory.Service) {
	a := s.authenticated
	api := &memoryAPI{managedAPI: m, mem: mem, st: mem.Store()}
	s.mux.HandleFunc("POST /v1/memory_stores", a(s.noQuery(api.createStore)))
	s.mux.HandleFunc("GET /v1/memory_stores", a(s.query(api.listStores, "limit", "page", "include_archived", "created_at[gte]", "created_at[lte]")))
	s.mux.HandleFunc("GET /v1/memory_stores/{id}", a(s.noQuery(api.getStore)))
	s.mux.HandleFunc("POST /v1/memory_stores/{id}", a(s.noQuery(api.updateStore)))
	s.mux.HandleFunc("DELETE /v1/memory_stores/{id}", a(s.noQuery(api.deleteStore)))
	s.mux.HandleFunc("POST /v1/memory_stores/{id}/archive", a(s.noQuery(api.archiveStore)))

	s.mux.HandleFunc("POST /v1/memory_stores/{id}/memories", a(s.query(api.createMemory, "view")))
	s.mux.HandleFunc("GET /v1/memory_stores/{id}/memories", a(s.query(api.listMemories, "depth", "limit", "page", "path_prefix", "view")))
	s.mux.HandleFunc("GET /v1/memory_stores/{id}/memories/{mid}", a(s.query(api.getMemory, "view")))
	s.mux.HandleFunc("POST /v1/memory_stores/{id}/memories/{mid}", a(s.query(api.updateMemory, "view")))
	s.mux.HandleFunc("DELETE /v1/memory_stores/{id}/memories/{mid}", a(s.query(api.deleteMemory, "expected_content_sha256")))

	s.mux.HandleFunc("GET /v1/memory_stores/{id}/memory_versions", a(s.query(api.listVersions,
		"api_key_id", "created_at[gte]", "created_at[lte]", "limit", "memory_id", "operation", "page", "service_account_id", "session_id", "view")))
	s.mux.HandleFunc("GET /v1/memory_stores/{id}/memory_versions/{vid}", a(s.query(api.getVersion, "view")))
	s.mux.HandleFunc("POST /v1/memory_stores/{id}/memory_versions/{vid}/redact", a(s.noQuery(api.redactVersion)))
}

// storeFor reads a memory store the caller's tenant owns; another tenant's
// answers exactly like a missing one.
func (a *memoryAPI) storeFor(r *http.Request) (*store.MemoryStore, error) {
	id := r.PathValue("id")
	m, err := a.mem.GetStore(r.Context(), tenant(r), id)
	if err != nil {
		return nil, notFoundAs("memory store", id, err)
	}
	return m, nil
}

// writableStoreFor is storeFor for a write: an archived store refuses.
func (a *memoryAPI) writableStoreFor(r *http.Request) (*store.MemoryStore, error) {
	m, err := a.storeFor(r)
	if err == nil && m.ArchivedAt != nil {
		err = Errorf(http.StatusConflict, TypeConflict, "memory store %q is archived; archived memory stores take no writes", m.ID)
	}
	return m, err
}

// actor is who an API write is recorded as: the API key that made it.
func actor(r *http.Request) store.MemoryActor {
	return store.MemoryActor{Type: "api_actor", ID: PrincipalFrom(r.Context()).KeyID}
}

func storeJSON(m *store.MemoryStore) map[string]any {
	return map[string]any{
		"id": m.ID, "type": "memory_store", "name": m.Name, "description": m.Description, "metadata": orEmptyMap(m.Metadata),
		"created_at": timeJSON(m.CreatedAt), "updated_at": timeJSON(m.UpdatedAt), "archived_at": timePtrJSON(m.ArchivedAt),
	}
}

// storeName checks a name: 1–255 characters, no control characters.
func storeName(in obj) (string, error) {
	name, err := in.ReqStr("name")
	if err == nil {
		err = in.LimitLen("name", name, maxMemStoreName)
	}
	if err == nil && strings.ContainsFunc(name, unicode.IsControl) {
		err = BadRequest("field %q must not contain control characters", in.Field("name"))
	}
	return name, err
}

func (a *memoryAPI) applyStoreFields(in obj, m *store.MemoryStore, create bool) error {
	if create || in.Has("name") {
		name, err := storeName(in)
		if err != nil {
			return err
		}
		m.Name = name
	}
	if in.Has("description") {
		d, err := in.Str("description")
		if err == nil {
			err = in.LimitLen("description", d, maxMemStoreDesc)
		}
		if err != nil {
			return err
		}
		m.Description = d
	}
	md, err := in.MetadataPatch("metadata", m.Metadata, false)
	if err != nil {
		return err
	}
	m.Metadata = md
	return nil
}

func (a *memoryAPI) createStore(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	m := &store.MemoryStore{ID: ids.New("memstore"), TenantID: tenant(r), Metadata: map[string]string{}}
	if err := firstErr(a.applyStoreFields(in, m, true), in.Strict()); err != nil {
		a.writeError(w, r, err)
		return
	}
	out, err := a.st.CreateMemoryStore(r.Context(), m)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, storeJSON(out))
}

func (a *memoryAPI) getStore(w http.ResponseWriter, r *http.Request) {
	m, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, storeJSON(m))
}

func (a *memoryAPI) updateStore(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	m, err := a.writableStoreFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := firstErr(a.applyStoreFields(in, m, false), in.Strict()); err != nil {
		a.writeError(w, r, err)
		return
	}
	out, err := a.st.UpdateMemoryStore(r.Context(), m)
	if err != nil {
		a.writeError(w, r, notFoundAs("memory store", m.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, storeJSON(out))
}

func (a *memoryAPI) archiveStore(w http.ResponseWriter, r *http.Request) {
	m, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out, err := a.st.ArchiveMemoryStore(r.Context(), m.ID, a.now())
	if err != nil {
		a.writeError(w, r, notFoundAs("memory store", m.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, storeJSON(out))
}

func (a *memoryAPI) deleteStore(w http.ResponseWriter, r *http.Request) {
	m, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.st.DeleteMemoryStore(r.Context(), m.ID); err != nil {
		a.writeError(w, r, notFoundAs("memory store", m.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": m.ID, "type": "memory_store_deleted"})
}

func (a *memoryAPI) listStores(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, false)
	var archived bool
	if err == nil {
		archived, err = queryBool(q, "include_archived")
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.MemoryStore, error) {
		return a.st.ListMemoryStores(r.Context(), store.ListResourcesParams{TenantID: tenant(r), Limit: n, IncludeArchived: archived, AfterID: after})
	}, func(m *store.MemoryStore) string { return m.ID }, func(m *store.MemoryStore) bool { return p.inTime(m.CreatedAt) })
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, m := range page {
		out = append(out, storeJSON(m))
	}
	writePage(w, out, more, func(m map[string]any) string { return m["id"].(string) })
}

// view reads ?view=basic|full; def applies when absent.
func view(r *http.Request, def string) (bool, error) {
	switch v := r.URL.Query().Get("view"); v {
	case "":
		return def == "full", nil
	case "basic", "full":
		return v == "full", nil
	default:
		return false, BadRequest("query parameter \"view\" must be basic or full, got %q", v)
	}
}

func memoryJSON(m *store.Memory, full bool) map[string]any {
	out := map[string]any{
		"id": m.ID, "type": "memory", "memory_store_id": m.StoreID, "path": m.Path, "memory_version_id": m.VersionID,
		"content_sha256": m.ContentSHA256, "content_size_bytes": m.SizeBytes, "content": nil,
		"created_at": timeJSON(m.CreatedAt), "updated_at": timeJSON(m.UpdatedAt),
	}
	if full {
		out["content"] = m.Content
	}
	return out
}

// contentErr is a memory content check's answer: 413 for the size limit,
// 400 for the rest, both naming the field.
func contentErr(in obj, err error) error {
	if errors.Is(err, memory.ErrTooLarge) {
		return Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge, "field %q: %s", in.Field("content"), err)
	}
	return BadRequest("field %q: %s", in.Field("content"), err)
}

func pathErr(field string, err error) error { return BadRequest("field %q: %s", field, err) }

func (a *memoryAPI) createMemory(w http.ResponseWriter, r *http.Request) {
	full, err := view(r, "basic")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	in, err := decodeObject(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	path, err := in.ReqStr("path")
	if err == nil {
		if perr := memory.CheckPath(path); perr != nil {
			err = pathErr(in.Field("path"), perr)
		}
	}
	if err == nil && !in.Set("content") {
		err = BadRequest("field %q is required (pass \"\" for an empty memory)", in.Field("content"))
	}
	var content string
	if err == nil {
		content, err = in.Str("content")
	}
	if err == nil {
		if cerr := memory.CheckContent(content); cerr != nil {
			err = contentErr(in, cerr)
		}
	}
	if err = firstErr(err, in.Strict()); err != nil {
		a.writeError(w, r, err)
		return
	}
	ms, err := a.writableStoreFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	m, err := a.st.CreateMemory(r.Context(), store.MemoryWrite{TenantID: tenant(r), StoreID: ms.ID, Path: path, Content: &content, Actor: actor(r)})
	if err != nil {
		a.writeError(w, r, notFoundAs("memory store", ms.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, memoryJSON(m, full))
}

// memoryFor reads a memory of the caller's store.
func (a *memoryAPI) memoryFor(r *http.Request, storeID string) (*store.Memory, error) {
	id := r.PathValue("mid")
	m, err := a.st.GetMemory(r.Context(), id)
	if err == nil && m.StoreID != storeID {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("memory", id, err)
	}
	return m, nil
}

func (a *memoryAPI) getMemory(w http.ResponseWriter, r *http.Request) {
	full, err := view(r, "full")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ms, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	m, err := a.memoryFor(r, ms.ID)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, memoryJSON(m, full))
}

// sha256Arg checks a content_sha256 value: 64 lowercase hex digits.
func sha256Arg(field, v string) error {
	if len(v) != 64 || strings.Trim(v, "0123456789abcdef") != "" {
		return BadRequest("%s must be 64 lowercase hexadecimal characters, got %q", field, v)
	}
	return nil
}

func (a *memoryAPI) updateMemory(w http.ResponseWriter, r *http.Request) {
	full, err := view(r, "basic")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	in, err := decodeObject(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wr := store.MemoryWrite{ID: r.PathValue("mid"), Actor: actor(r)}
	var errs []error
	if in.Set("path") {
		p, err := in.Str("path")
		if err == nil {
			if perr := memory.CheckPath(p); perr != nil {
				err = pathErr(in.Field("path"), perr)
			}
		}
		wr.Path, errs = p, append(errs, err)
	}
	if in.Set("content") {
		c, err := in.Str("content")
		if err == nil {
			if cerr := memory.CheckContent(c); cerr != nil {
				err = contentErr(in, cerr)
			}
		}
		wr.Content, errs = &c, append(errs, err)
	}
	if in.Set("precondition") {
		pre, _, err := in.Object("precondition")
		if err == nil {
			var typ string
			if typ, err = pre.ReqStr("type"); err == nil && typ != "content_sha256" {
				err = BadRequest("field %q must be content_sha256", pre.Field("type"))
			}
		}
		if err == nil {
			wr.ExpectSHA256, err = pre.ReqStr("content_sha256")
		}
		if err == nil {
			err = sha256Arg("field \""+pre.Field("content_sha256")+"\"", wr.ExpectSHA256)
		}
		if err == nil {
			err = pre.Strict()
		}
		errs = append(errs, err)
	}
	if err := firstErr(append(errs, in.Strict())...); err != nil {
		a.writeError(w, r, err)
		return
	}
	ms, err := a.writableStoreFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wr.TenantID, wr.StoreID = tenant(r), ms.ID
	m, err := a.st.UpdateMemory(r.Context(), wr)
	if err != nil {
		a.writeError(w, r, a.memoryWriteErr(wr.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, memoryJSON(m, full))
}

// memoryWriteErr explains a failed write: a failed precondition is the
// SDK's 409.
func (a *memoryAPI) memoryWriteErr(id string, err error) error {
	if errors.Is(err, store.ErrVersionMismatch) {
		return Errorf(http.StatusConflict, TypeConflict, "precondition failed: %s", err)
	}
	return notFoundAs("memory", id, err)
}

func (a *memoryAPI) deleteMemory(w http.ResponseWriter, r *http.Request) {
	wr := store.MemoryWrite{ID: r.PathValue("mid"), Actor: actor(r), ExpectSHA256: r.URL.Query().Get("expected_content_sha256")}
	if wr.ExpectSHA256 != "" {
		if err := sha256Arg("query parameter \"expected_content_sha256\"", wr.ExpectSHA256); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	ms, err := a.writableStoreFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wr.TenantID, wr.StoreID = tenant(r), ms.ID
	if err := a.st.DeleteMemory(r.Context(), wr); err != nil {
		a.writeError(w, r, a.memoryWriteErr(wr.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": wr.ID, "type": "memory_deleted"})
}

// listMemories lists by path with the SDK's depth roll-up: with depth d,
// memories more than d segments below path_prefix are grouped into one
// memory_prefix item per directory at depth d. A cursor is the last path
// listed: a memory's, or a memory_prefix's (ending in /), whose memories
// the next page skips.
func (a *memoryAPI) listMemories(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	full, err := view(r, "basic")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	max := 100
	if full {
		max = fullViewLimit
	}
	p, err := parsePageQuery(q, 20, 100, false)
	limit := p.limit
	prefix := q.Get("path_prefix")
	if err == nil && prefix != "" {
		if perr := memory.CheckPrefix(prefix); perr != nil {
			err = BadRequest("query parameter \"path_prefix\": %s", perr)
		}
	}
	if prefix == "" {
		prefix = "/"
	}
	depth := 0
	if v := q.Get("depth"); err == nil && v != "" {
		if depth, err = strconv.Atoi(v); err != nil || depth < 0 {
			err = BadRequest("query parameter \"depth\" must be a non-negative integer, got %q", v)
		}
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	limit = min(limit, max)
	ms, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	type item struct {
		json map[string]any
		pos  string
	}
	var (
		page []item
		more bool
		// skip is the last memory_prefix listed: memories under it are in
		// that item. A cursor ending in / is one (no memory path does).
		skip  string
		after = p.cursor
	)
	if strings.HasSuffix(after, "/") {
		skip = after
	}
	for len(page) <= limit {
		from := after
		if skip != "" && strings.HasPrefix(from, skip) {
			// Jump past nearly the whole group; the HasPrefix check below
			// catches the paths that sort after U+10FFFF under it.
			from = skip + "\U0010FFFF"
		}
		batch, err := a.st.ListMemories(r.Context(), store.MemoryListParams{StoreID: ms.ID, PathPrefix: prefix, AfterPath: from, Limit: limit + 1})
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		for _, m := range batch {
			after = m.Path
			if skip != "" && strings.HasPrefix(m.Path, skip) {
				continue
			}
			rest := strings.Split(strings.TrimPrefix(m.Path, prefix), "/")
			it := item{json: memoryJSON(m, full), pos: m.Path}
			if depth > 0 && len(rest) > depth {
				dir := prefix + strings.Join(rest[:depth], "/") + "/"
				it, skip = item{json: map[string]any{"type": "memory_prefix", "path": dir}, pos: dir}, dir
			}
			page = append(page, it)
			if len(page) > limit {
				break
			}
		}
		if len(batch) < limit+1 {
			break
		}
	}
	if len(page) > limit {
		page, more = page[:limit], true
	}
	out := make([]map[string]any, 0, len(page))
	for _, it := range page {
		out = append(out, it.json)
	}
	resp := pageJSON[map[string]any]{Data: out}
	if more {
		resp.NextPage = encodeCursor(page[len(page)-1].pos)
	}
	writeJSON(w, http.StatusOK, resp)
}

func actorJSON(x store.MemoryActor) any {
	switch x.Type {
	case "":
		return nil
	case "session_actor":
		return map[string]string{"type": x.Type, "session_id": x.ID}
	case "api_actor":
		return map[string]string{"type": x.Type, "api_key_id": x.ID}
	case "user_actor":
		return map[string]string{"type": x.Type, "user_id": x.ID}
	default:
		return map[string]string{"type": x.Type, "service_account_id": x.ID}
	}
}

func versionJSON(v *store.MemoryVersion, full bool) map[string]any {
	out := map[string]any{
		"id": v.ID, "type": "memory_version", "memory_id": v.MemoryID, "memory_store_id": v.StoreID, "operation": v.Operation,
		"created_at": timeJSON(v.CreatedAt), "created_by": actorJSON(v.CreatedBy),
		"redacted_at": timePtrJSON(v.RedactedAt), "redacted_by": actorJSON(v.RedactedBy),
		"path": nil, "content": nil, "content_sha256": nil, "content_size_bytes": nil,
	}
	if v.RedactedAt != nil {
		return out
	}
	out["path"] = v.Path
	if v.Operation != store.MemoryDeleted {
		out["content_sha256"], out["content_size_bytes"] = v.ContentSHA256, v.SizeBytes
		if full {
			out["content"] = v.Content
		}
	}
	return out
}

func (a *memoryAPI) versionFor(r *http.Request, storeID string) (*store.MemoryVersion, error) {
	id := r.PathValue("vid")
	v, err := a.st.GetMemoryVersion(r.Context(), id)
	if err == nil && v.StoreID != storeID {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFoundAs("memory version", id, err)
	}
	return v, nil
}

func (a *memoryAPI) getVersion(w http.ResponseWriter, r *http.Request) {
	full, err := view(r, "full")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ms, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	v, err := a.versionFor(r, ms.ID)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, versionJSON(v, full))
}

func (a *memoryAPI) redactVersion(w http.ResponseWriter, r *http.Request) {
	ms, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	v, err := a.versionFor(r, ms.ID)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out, err := a.st.RedactMemoryVersion(r.Context(), v.ID, actor(r), a.now())
	if err != nil {
		a.writeError(w, r, notFoundAs("memory version", v.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, versionJSON(out, true))
}

// listVersions lists newest first. The actor filters are exclusive: a
// version has one author, so asking for two kinds of author lists nothing.
func (a *memoryAPI) listVersions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	full, err := view(r, "basic")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	max := 100
	if full {
		max = fullViewLimit
	}
	p, err := parsePageQuery(q, 20, 100, true)
	lp := store.MemoryVersionListParams{MemoryID: q.Get("memory_id"), Operation: q.Get("operation"), CreatedGTE: p.gte, CreatedLTE: p.lte}
	switch lp.Operation {
	case "", store.MemoryCreated, store.MemoryModified, store.MemoryDeleted:
	default:
		err = firstErr(err, BadRequest("query parameter \"operation\" must be created, modified or deleted, got %q", lp.Operation))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	filters := 0
	for name, typ := range map[string]string{"session_id": "session_actor", "api_key_id": "api_actor", "service_account_id": "service_account_actor"} {
		if v := q.Get(name); v != "" {
			lp.Actor, filters = store.MemoryActor{Type: typ, ID: v}, filters+1
		}
	}
	ms, err := a.storeFor(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	lp.StoreID = ms.ID
	var page []*store.MemoryVersion
	more := false
	if filters <= 1 {
		lp.BeforeID, lp.Limit = p.cursor, min(p.limit, max)+1
		page, err = a.st.ListMemoryVersions(r.Context(), lp)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if len(page) > min(p.limit, max) {
			page, more = page[:min(p.limit, max)], true
		}
	}
	out := make([]map[string]any, 0, len(page))
	for _, v := range page {
		out = append(out, versionJSON(v, full))
	}
	writePage(w, out, more, func(m map[string]any) string { return m["id"].(string) })
}
