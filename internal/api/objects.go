package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

type objectJSON struct {
	Type          string                     `json:"type"`
	Class         string                     `json:"class"`
	ID            string                     `json:"id"`
	Status        string                     `json:"status"`
	SandboxID     string                     `json:"sandbox_id"`
	StorageMode   string                     `json:"storage_mode,omitempty"`
	Storage       map[string]json.RawMessage `json:"storage,omitempty"`
	StorageSource string                     `json:"storage_source,omitempty"`
	StorageKeys   int64                      `json:"storage_keys"`
	StorageBytes  int64                      `json:"storage_bytes"`
	Version       int64                      `json:"version"`
	LastCallAt    *time.Time                 `json:"last_call_at,omitempty"`
	HibernatedAt  *time.Time                 `json:"hibernated_at,omitempty"`
	CreatedAt     time.Time                  `json:"created_at"`
	UpdatedAt     time.Time                  `json:"updated_at"`
}

func toObjectJSON(o *store.Object) objectJSON {
	return objectJSON{Type: "object", Class: o.Class, ID: o.ID, Status: string(o.Status), SandboxID: o.SandboxID,
		StorageKeys: o.StorageKeys, StorageBytes: o.StorageBytes, Version: o.Version, LastCallAt: o.LastCallAt,
		HibernatedAt: o.HibernatedAt, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

// classDefJSON is a class definition on the wire: the [[objects]] fields.
type classDefJSON struct {
	Class              string            `json:"class"`
	Image              string            `json:"image"`
	Driver             string            `json:"driver"`
	IdleTimeoutSeconds int64             `json:"idle_timeout_seconds"`
	InitCommand        []string          `json:"init_command"`
	MaxConcurrency     int64             `json:"max_concurrency"`
	StorageMode        string            `json:"storage_mode"`
	AppDir             string            `json:"app_dir"`
	Env                map[string]string `json:"env"`
	Isolation          string            `json:"isolation"`
	ObjectsPerSandbox  int64             `json:"objects_per_sandbox,omitempty"`
}

type classJSON struct {
	Type string `json:"type"`
	classDefJSON
	Source    string     `json:"source"` // "config" or "api"
	CreatedAt *time.Time `json:"created_at,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	// Bundle is the class's uploaded app (API classes).
	Bundle *bundleJSON `json:"bundle,omitempty"`
}

func toClassJSON(c *object.Class) classJSON {
	d := c.Def()
	out := classJSON{Type: "object_class", Source: "api", classDefJSON: classDefJSON{
		Class: d.Class, Image: d.Image, Driver: d.Driver, IdleTimeoutSeconds: d.IdleTimeoutSeconds, InitCommand: d.InitCommand,
		MaxConcurrency: d.MaxConcurrency, StorageMode: d.StorageMode, AppDir: d.AppDir, Env: d.Env,
		Isolation: d.Isolation, ObjectsPerSandbox: d.ObjectsPerSandbox,
	}}
	if c.FromConfig {
		out.Source = "config"
	} else {
		out.CreatedAt, out.UpdatedAt = &c.CreatedAt, &c.UpdatedAt
	}
	return out
}

type alarmJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Class     string          `json:"class"`
	ObjectID  string          `json:"object_id"`
	Method    string          `json:"method"`
	Args      json.RawMessage `json:"args,omitempty"`
	FireAt    time.Time       `json:"fire_at"`
	Fired     bool            `json:"fired"`
	Attempts  int64           `json:"attempts"`
	LastError string          `json:"last_error,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

func toAlarmJSON(a *store.Alarm) alarmJSON {
	return alarmJSON{ID: a.ID, Type: "alarm", Class: a.Class, ObjectID: a.ObjectKey.ID, Method: a.Method, Args: a.Args,
		FireAt: a.FireAt, Fired: a.Fired, Attempts: a.Attempts, LastError: a.LastError, CreatedAt: a.CreatedAt}
}

type auditJSON struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Kind    string          `json:"kind"`
	Subject string          `json:"subject"`
	Data    json.RawMessage `json:"data,omitempty"`
	At      time.Time       `json:"at"`
}

func (s *Server) registerObjectRoutes() {
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/objects/definitions", a(s.defineObjectClass))
	s.mux.HandleFunc("GET /v1/objects/definitions", a(s.noQuery(s.listObjectClasses)))
	s.mux.HandleFunc("GET /v1/objects/definitions/{class}", a(s.noQuery(s.getObjectClass)))
	s.mux.HandleFunc("DELETE /v1/objects/definitions/{class}", a(s.deleteObjectClass))
	s.mux.HandleFunc("GET /v1/objects", a(s.query(s.listObjects, "class", "status", "after", "limit")))
	s.mux.HandleFunc("GET /v1/objects/{class}/{id}", a(s.objectOwner(s.noQuery(s.getObject))))
	s.mux.HandleFunc("DELETE /v1/objects/{class}/{id}", a(s.objectOwner(s.deleteObject)))
	s.mux.HandleFunc("POST /v1/objects/{class}/{id}/call", a(s.objectOwner(s.callObject)))
	s.mux.HandleFunc("POST /v1/objects/{class}/{id}/hibernate", a(s.objectOwner(s.hibernateObject)))
	s.mux.HandleFunc("POST /v1/objects/{class}/{id}/checkpoint", a(s.objectOwner(s.checkpointObject)))
	s.mux.HandleFunc("POST /v1/objects/{class}/{id}/alarms", a(s.objectOwner(s.setAlarm)))
	s.mux.HandleFunc("GET /v1/objects/{class}/{id}/alarms", a(s.objectOwner(s.noQuery(s.listAlarms))))
	s.mux.HandleFunc("DELETE /v1/objects/{class}/{id}/alarms/{alarm_id}", a(s.objectOwner(s.deleteAlarm)))
	s.mux.HandleFunc("GET /v1/audit", a(s.query(s.listAudit, "kind", "subject", "after", "limit")))
	s.registerBundleRoutes()
}

func objectKey(r *http.Request) store.ObjectKey {
	return store.ObjectKey{TenantID: PrincipalFrom(r.Context()).TenantID, Class: r.PathValue("class"), ID: r.PathValue("id")}
}

// objectError maps the runtime's errors to API errors.
func objectError(k store.ObjectKey, err error) error {
	if err, ok := bundleError(err); ok {
		return err
	}
	var fe *object.FieldError
	var le *object.LimitError
	switch {
	case errors.As(err, &fe):
		return BadRequest("%s", fe.Error())
	case errors.As(err, &le):
		if le.TooLarge {
			return Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge, "%s", le.Error())
		}
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "%s", err.Error())
	case errors.Is(err, object.ErrUnknownClass):
		return Errorf(http.StatusNotFound, TypeNotFound, "%s", err.Error())
	case errors.Is(err, object.ErrClassConflict):
		return Errorf(http.StatusConflict, TypeConflict, "%s", err.Error())
	case errors.Is(err, object.ErrSandboxUnavailable):
		return Errorf(http.StatusServiceUnavailable, TypeUnavailable, "%s", err.Error())
	case errors.Is(err, object.ErrCallTimeout):
		return Errorf(http.StatusGatewayTimeout, "timeout_error", "%s", err.Error())
	case errors.Is(err, store.ErrNotFound):
		if k.ID == "" {
			return Errorf(http.StatusNotFound, TypeNotFound, "%s", err.Error())
		}
		return NotFound("object", k.Class+"/"+k.ID)
	}
	return err
}

// callObjectRequest is the body of POST /v1/objects/{class}/{id}/call.
type callObjectRequest struct {
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args"`
}

func (s *Server) callObject(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	var in callObjectRequest
	if err := decodeJSON(r, &in); err != nil {
		var ae *Error
		if errors.As(err, &ae) && ae.Status == http.StatusRequestEntityTooLarge {
			err = Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
				"the call body is over the request limit; args are limited to %d bytes (1 MB) and the whole body to server.max_body_bytes", object.MaxArgsBytes)
		}
		s.writeError(w, r, err)
		return
	}
	if err := requireField("method", in.Method); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.objects.Call(r.Context(), object.CallParams{TenantID: k.TenantID, Class: k.Class, ID: k.ID, Method: in.Method, Args: in.Args})
	var oe *object.ObjectError
	if errors.As(err, &oe) {
		// The object's own error: its status and body, as they are.
		ct := oe.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("X-Agentkernel-Object-Error", "true")
		w.WriteHeader(oe.Status)
		_, _ = w.Write(oe.Body)
		return
	}
	if err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"result": res})
}

func (s *Server) getObject(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	in, err := s.objects.Get(r.Context(), k)
	if err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	out := toObjectJSON(in.Object)
	out.Storage, out.StorageSource, out.StorageMode = in.Storage, in.StorageSource, in.StorageMode
	if out.Storage == nil {
		out.Storage = map[string]json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listObjects(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := object.ListParams{TenantID: PrincipalFrom(r.Context()).TenantID, Class: q.Get("class"), AfterID: q.Get("after"), Limit: 100}
	switch st := q.Get("status"); st {
	case "":
	case string(store.ObjectActive), string(store.ObjectHibernating):
		p.Status = store.ObjectStatus(st)
	default:
		s.writeError(w, r, BadRequest("query parameter \"status\": %q is not a status (Active, Hibernating)", st))
		return
	}
	limit, err := queryLimit(q, p.Limit, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.Limit = limit
	want := p.Limit
	p.Limit++
	list, err := s.objects.List(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listJSON[objectJSON]{Data: []objectJSON{}}
	if len(list) > want {
		list, out.HasMore = list[:want], true
	}
	for _, o := range list {
		out.Data = append(out.Data, toObjectJSON(o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteObject(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	if err := s.objects.Delete(r.Context(), k); err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "object_deleted", "class": k.Class, "id": k.ID, "deleted": true})
}

func (s *Server) hibernateObject(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	o, err := s.objects.Hibernate(r.Context(), k)
	if err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	writeJSON(w, http.StatusOK, toObjectJSON(o))
}

func (s *Server) checkpointObject(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	o, err := s.objects.Checkpoint(r.Context(), k)
	if err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	writeJSON(w, http.StatusOK, toObjectJSON(o))
}

// setAlarmRequest is the body of POST /v1/objects/{class}/{id}/alarms.
type setAlarmRequest struct {
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args"`
	FireAt string          `json:"fire_at"`
}

func (s *Server) setAlarm(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	var in setAlarmRequest
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := firstErr(requireField("method", in.Method), requireField("fire_at", in.FireAt)); err != nil {
		s.writeError(w, r, err)
		return
	}
	at, err := time.Parse(time.RFC3339Nano, in.FireAt)
	if err != nil {
		s.writeError(w, r, BadRequest("field \"fire_at\": %q is not an RFC 3339 time (example: 2026-02-16T00:00:00Z)", in.FireAt))
		return
	}
	a, err := s.objects.SetAlarm(r.Context(), object.SetAlarmParams{Key: k, Method: in.Method, Args: in.Args, FireAt: at})
	if err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	writeJSON(w, http.StatusCreated, toAlarmJSON(a))
}

func (s *Server) listAlarms(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	list, err := s.objects.Alarms(r.Context(), k)
	if err != nil {
		s.writeError(w, r, objectError(k, err))
		return
	}
	out := listJSON[alarmJSON]{Data: []alarmJSON{}}
	for _, a := range list {
		out.Data = append(out.Data, toAlarmJSON(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteAlarm(w http.ResponseWriter, r *http.Request) {
	k := objectKey(r)
	id := r.PathValue("alarm_id")
	if err := s.objects.DeleteAlarm(r.Context(), k, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = NotFound("alarm", id)
		}
		s.writeError(w, r, objectError(k, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "alarm_deleted", "id": id, "deleted": true})
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListAuditParams{TenantID: PrincipalFrom(r.Context()).TenantID, Kind: q.Get("kind"), Subject: q.Get("subject"), AfterID: q.Get("after"), Limit: 100}
	limit, err := queryLimit(q, p.Limit, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p.Limit = limit
	want := p.Limit
	p.Limit++
	list, err := s.objects.Audit(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listJSON[auditJSON]{Data: []auditJSON{}}
	if len(list) > want {
		list, out.HasMore = list[:want], true
	}
	for _, a := range list {
		out.Data = append(out.Data, auditJSON{ID: a.ID, Type: "audit_record", Kind: a.Kind, Subject: a.Subject, Data: a.Data, At: a.At})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) defineObjectClass(w http.ResponseWriter, r *http.Request) {
	var in classDefJSON
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.objects.DefineClass(r.Context(), PrincipalFrom(r.Context()).TenantID, object.ClassDef{
		Class: in.Class, Image: in.Image, Driver: in.Driver, IdleTimeoutSeconds: in.IdleTimeoutSeconds, InitCommand: in.InitCommand,
		MaxConcurrency: in.MaxConcurrency, StorageMode: in.StorageMode, AppDir: in.AppDir, Env: in.Env,
		Isolation: in.Isolation, ObjectsPerSandbox: in.ObjectsPerSandbox,
	})
	if err != nil {
		s.writeError(w, r, objectError(store.ObjectKey{}, err))
		return
	}
	writeJSON(w, http.StatusCreated, toClassJSON(c))
}

func (s *Server) listObjectClasses(w http.ResponseWriter, r *http.Request) {
	tenant := PrincipalFrom(r.Context()).TenantID
	list, err := s.objects.Classes(r.Context(), tenant)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listJSON[classJSON]{Data: []classJSON{}}
	for _, c := range list {
		cj, err := s.classWithBundle(r, tenant, c)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out.Data = append(out.Data, cj)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getObjectClass(w http.ResponseWriter, r *http.Request) {
	tenant := PrincipalFrom(r.Context()).TenantID
	c, err := s.objects.Class(r.Context(), tenant, r.PathValue("class"))
	if err != nil {
		s.writeError(w, r, objectError(store.ObjectKey{}, err))
		return
	}
	cj, err := s.classWithBundle(r, tenant, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cj)
}

// classWithBundle is a class on the wire with its bundle, if it has one.
func (s *Server) classWithBundle(r *http.Request, tenant string, c *object.Class) (classJSON, error) {
	cj := toClassJSON(c)
	if c.FromConfig {
		return cj, nil
	}
	b, err := s.objects.Bundle(r.Context(), tenant, c.Name)
	switch {
	case err == nil:
		cj.Bundle = toBundleJSON(b)
	case !errors.Is(err, object.ErrNoBundle):
		return cj, err
	}
	return cj, nil
}

func (s *Server) deleteObjectClass(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("class")
	if err := s.objects.DeleteClass(r.Context(), PrincipalFrom(r.Context()).TenantID, name); err != nil {
		s.writeError(w, r, objectError(store.ObjectKey{}, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "object_class_deleted", "class": name, "deleted": true})
}
