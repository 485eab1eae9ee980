package agentkernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ObjectsService calls and manages durable objects: stateful actors, each
// in its own sandbox, addressed by (class, id), created and woken on
// demand, hibernated when idle with their storage kept.
type ObjectsService struct{ c *Client }

// ObjectCall is one method call: Args are sent to the object as JSON.
type ObjectCall struct {
	Method string `json:"method"`
	Args   any    `json:"args,omitempty"`
}

// ObjectResult is a method's JSON result.
type ObjectResult json.RawMessage

// String returns the result's JSON text.
func (r ObjectResult) String() string { return string(r) }

// Decode unmarshals the result into v.
func (r ObjectResult) Decode(v any) error { return json.Unmarshal(r, v) }

// MarshalJSON keeps the result as it is when re-encoded.
func (r ObjectResult) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// ObjectError is an error answered by the object's own code: its HTTP
// status and body as the object sent them. The daemon never retries it.
type ObjectError struct {
	StatusCode  int
	Body        []byte
	ContentType string
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("the object's code answered HTTP %d: %s", e.StatusCode, strings.TrimSpace(string(e.Body)))
}

// Object is a durable object's status and (from Get) its storage.
type Object struct {
	Type          string                     `json:"type"`
	Class         string                     `json:"class"`
	ID            string                     `json:"id"`
	Status        string                     `json:"status"` // "Active" or "Hibernating"
	SandboxID     string                     `json:"sandbox_id"`
	StorageMode   string                     `json:"storage_mode,omitempty"`
	Storage       map[string]json.RawMessage `json:"storage,omitempty"`
	StorageSource string                     `json:"storage_source,omitempty"` // "live" or "persisted"
	StorageKeys   int64                      `json:"storage_keys"`
	StorageBytes  int64                      `json:"storage_bytes"`
	Version       int64                      `json:"version"`
	LastCallAt    *time.Time                 `json:"last_call_at,omitempty"`
	HibernatedAt  *time.Time                 `json:"hibernated_at,omitempty"`
	CreatedAt     time.Time                  `json:"created_at"`
	UpdatedAt     time.Time                  `json:"updated_at"`
}

// ObjectListParams filters List; empty fields do not filter.
type ObjectListParams struct {
	Class  string
	Status string // "Active" or "Hibernating"
	After  string // continue after "class/id"
	Limit  int
}

// AlarmParams schedules a method call on an object.
type AlarmParams struct {
	Method string    `json:"method"`
	Args   any       `json:"args,omitempty"`
	FireAt time.Time `json:"fire_at"`
}

// Alarm is a scheduled method call.
type Alarm struct {
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

// ObjectClass is a class definition (POST /v1/objects/definitions, or an
// [[objects]] entry of agentkernel.toml when Source is "config"). A class
// defined through the API gets its code from a bundle (UploadBundle);
// AppDir, a host directory, is only for [[objects]] and is refused here.
type ObjectClass struct {
	Class              string            `json:"class"`
	Image              string            `json:"image,omitempty"`
	Driver             string            `json:"driver,omitempty"`
	IdleTimeoutSeconds int64             `json:"idle_timeout_seconds,omitempty"`
	InitCommand        []string          `json:"init_command"`
	MaxConcurrency     int64             `json:"max_concurrency,omitempty"`
	StorageMode        string            `json:"storage_mode,omitempty"` // "snapshot" or "write-through"
	AppDir             string            `json:"app_dir,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	// Isolation is "object" (default: a sandbox per object) or "class"
	// (the tenant's objects of the class share sandboxes, at most
	// ObjectsPerSandbox each; default 1000).
	Isolation         string `json:"isolation,omitempty"`
	ObjectsPerSandbox int64  `json:"objects_per_sandbox,omitempty"`
	Source            string `json:"source,omitempty"`
	// Bundle is the class's uploaded app, when it has one (read only).
	Bundle *ObjectBundle `json:"bundle,omitempty"`
}

// AuditRecord is one entry of the tenant's audit log.
type AuditRecord struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Subject string          `json:"subject"`
	Data    json.RawMessage `json:"data,omitempty"`
	At      time.Time       `json:"at"`
}

func objPath(class, id string, rest ...string) string {
	p := "/v1/objects/" + pathSegment(class) + "/" + pathSegment(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Call calls a method on an object, creating and waking it as needed. An
// error the object's code answered is an *ObjectError.
func (s *ObjectsService) Call(ctx context.Context, class, id string, call ObjectCall) (ObjectResult, error) {
	body, err := json.Marshal(call)
	if err != nil {
		return nil, fmt.Errorf("encode the call: %w", err)
	}
	req, err := s.c.newRequest(ctx, http.MethodPost, objPath(class, id, "call"), strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.c.httpClient.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Agentkernel-Object-Error") == "true" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return nil, &ObjectError{StatusCode: resp.StatusCode, Body: b, ContentType: resp.Header.Get("Content-Type")}
	}
	if !ok(resp) {
		return nil, decodeError(resp)
	}
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode the result of %s/%s.%s: %w", class, id, call.Method, err)
	}
	return ObjectResult(out.Result), nil
}

// Get returns an object's status and storage.
func (s *ObjectsService) Get(ctx context.Context, class, id string) (*Object, error) {
	var o Object
	if err := s.c.do(ctx, http.MethodGet, objPath(class, id), nil, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// List lists objects (without their storage).
func (s *ObjectsService) List(ctx context.Context, p ObjectListParams) ([]Object, error) {
	q := url.Values{}
	if p.Class != "" {
		q.Set("class", p.Class)
	}
	if p.Status != "" {
		q.Set("status", p.Status)
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Limit > 0 {
		q.Set("limit", fmt.Sprint(p.Limit))
	}
	path := "/v1/objects"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Data []Object `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Delete deletes an object with its storage, alarms and sandbox.
func (s *ObjectsService) Delete(ctx context.Context, class, id string) error {
	return s.c.do(ctx, http.MethodDelete, objPath(class, id), nil, nil)
}

// Hibernate persists an object's storage and stops its sandbox now.
func (s *ObjectsService) Hibernate(ctx context.Context, class, id string) (*Object, error) {
	var o Object
	if err := s.c.do(ctx, http.MethodPost, objPath(class, id, "hibernate"), struct{}{}, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Checkpoint persists an object's storage without hibernating it.
func (s *ObjectsService) Checkpoint(ctx context.Context, class, id string) (*Object, error) {
	var o Object
	if err := s.c.do(ctx, http.MethodPost, objPath(class, id, "checkpoint"), struct{}{}, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// SetAlarm schedules a method call, replacing the pending alarm for the
// same method.
func (s *ObjectsService) SetAlarm(ctx context.Context, class, id string, p AlarmParams) (*Alarm, error) {
	if p.FireAt.IsZero() {
		return nil, errors.New("AlarmParams.FireAt is required")
	}
	var a Alarm
	if err := s.c.do(ctx, http.MethodPost, objPath(class, id, "alarms"), p, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListAlarms lists an object's alarms, pending and fired.
func (s *ObjectsService) ListAlarms(ctx context.Context, class, id string) ([]Alarm, error) {
	var out struct {
		Data []Alarm `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, objPath(class, id, "alarms"), nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// DeleteAlarm deletes one of an object's alarms.
func (s *ObjectsService) DeleteAlarm(ctx context.Context, class, id, alarmID string) error {
	return s.c.do(ctx, http.MethodDelete, objPath(class, id, "alarms", url.PathEscape(alarmID)), nil, nil)
}

// Define creates or replaces a class for the caller's tenant.
func (s *ObjectsService) Define(ctx context.Context, c ObjectClass) (*ObjectClass, error) {
	c.Source, c.Bundle = "", nil
	var out ObjectClass
	if err := s.c.do(ctx, http.MethodPost, "/v1/objects/definitions", c, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Definition returns a class.
func (s *ObjectsService) Definition(ctx context.Context, class string) (*ObjectClass, error) {
	var out ObjectClass
	if err := s.c.do(ctx, http.MethodGet, "/v1/objects/definitions/"+url.PathEscape(class), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Definitions lists the classes the caller can use.
func (s *ObjectsService) Definitions(ctx context.Context) ([]ObjectClass, error) {
	var out struct {
		Data []ObjectClass `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, "/v1/objects/definitions", nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// DeleteDefinition deletes a class defined through the API.
func (s *ObjectsService) DeleteDefinition(ctx context.Context, class string) error {
	return s.c.do(ctx, http.MethodDelete, "/v1/objects/definitions/"+url.PathEscape(class), nil, nil)
}

// Audit lists the tenant's audit records, oldest first; kind filters
// (e.g. "ObjectHibernated", "AlarmFailed").
func (s *ObjectsService) Audit(ctx context.Context, kind string) ([]AuditRecord, error) {
	path := "/v1/audit?limit=1000"
	if kind != "" {
		path += "&kind=" + url.QueryEscape(kind)
	}
	var out struct {
		Data []AuditRecord `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}
