package object

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Headers of the in-sandbox protocol (see doc.go).
const (
	HeaderStorageMode  = "X-Agentkernel-Storage-Mode"
	HeaderObjectClass  = "X-Agentkernel-Object-Class"
	HeaderObjectID     = "X-Agentkernel-Object-Id"
	HeaderAlarmID      = "X-Agentkernel-Alarm-Id"
	HeaderAlarmRetries = "X-Agentkernel-Alarm-Retry-Count"
	HeaderAlarmIsRetry = "X-Agentkernel-Alarm-Is-Retry"
	HeaderEnvelope     = "X-Agentkernel-Envelope"
)

// ServerPort is where the object's server listens inside its sandbox.
const ServerPort = 9333

const (
	serverStartTimeout = 30 * time.Second
	// maxAnswerBytes bounds what the runtime reads from an object: a result
	// plus a full write set.
	maxAnswerBytes = 128 << 20
)

// errNotListening: the guest reached nothing on :9333 (connection refused):
// the method never ran, so restarting the server and retrying is safe.
var errNotListening = errors.New("object server is not listening")

// AlarmCall marks a call made by the alarm poller.
type AlarmCall struct {
	ID         string
	RetryCount int64
}

// answer is the object's answer to a method call, unwrapped.
type answer struct {
	status      int
	body        []byte
	contentType string
	writes      []store.StorageWrite
}

type envelope struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Writes []struct {
		Key    string          `json:"key"`
		Value  json.RawMessage `json:"value"`
		Delete bool            `json:"delete"`
	} `json:"writes"`
}

// invoke sends POST /{method} and unwraps the answer.
func invoke(ctx context.Context, hc *http.Client, cls *Class, key store.ObjectKey, method string, args []byte, alarm *AlarmCall) (*answer, error) {
	if len(args) == 0 {
		args = []byte("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://object/"+method, bytes.NewReader(args))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderStorageMode, cls.StorageMode)
	req.Header.Set(HeaderObjectClass, key.Class)
	req.Header.Set(HeaderObjectID, key.ID)
	if alarm != nil {
		req.Header.Set(HeaderAlarmID, alarm.ID)
		req.Header.Set(HeaderAlarmRetries, strconv.FormatInt(alarm.RetryCount, 10))
		req.Header.Set(HeaderAlarmIsRetry, strconv.FormatBool(alarm.RetryCount > 0))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, targetErr(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, err
	}
	if err := proxyError(resp, body); err != nil {
		return nil, err
	}
	a := &answer{status: resp.StatusCode, body: body, contentType: resp.Header.Get("Content-Type")}
	if resp.Header.Get(HeaderEnvelope) == "1" {
		var env envelope
		if err := json.Unmarshal(body, &env); err != nil {
			return nil, &ObjectError{Status: http.StatusBadGateway, ContentType: "application/json",
				Body: mustJSON(map[string]string{"error": "object server sent a malformed write-through envelope: " + err.Error()})}
		}
		a.body, a.contentType = env.Result, "application/json"
		if resp.StatusCode/100 != 2 {
			a.body = env.Error
		}
		for _, w := range env.Writes {
			a.writes = append(a.writes, store.StorageWrite{Key: w.Key, Value: w.Value, Delete: w.Delete})
		}
	}
	if resp.StatusCode/100 == 2 {
		a.body = asJSON(a.body)
	}
	return a, nil
}

// proxyError recognises the guest proxy's own 502 (nothing answered on
// :9333) so it is not mistaken for the object's answer.
func proxyError(resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusBadGateway {
		return nil
	}
	var pe struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(body, &pe) != nil || pe.Code != "unreachable" || !strings.HasPrefix(pe.Error, "object server at ") {
		return nil
	}
	if strings.Contains(pe.Error, "connection refused") {
		return fmt.Errorf("%w: %s", errNotListening, pe.Error)
	}
	return unavailable("%s", pe.Error)
}

// targetErr recognises the guest's report that it could not connect to
// :9333 (ObjectClient), the counterpart of proxyError.
func targetErr(err error) error {
	var te *guest.TargetError
	if !errors.As(err, &te) {
		return err
	}
	if te.Refused {
		return fmt.Errorf("%w: %s", errNotListening, te.Message)
	}
	return unavailable("%s", te.Message)
}

// asJSON makes a result JSON: empty is null, non-JSON text a JSON string.
func asJSON(b []byte) json.RawMessage {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return json.RawMessage("null")
	case json.Valid(b):
		return b
	}
	return mustJSON(string(b))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// storageRequest is a request to /__storage for one object (the headers
// say which: a server of a class-mode class serves many).
func storageRequest(ctx context.Context, method string, key store.ObjectKey, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://object/__storage", body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(HeaderObjectClass, key.Class)
	req.Header.Set(HeaderObjectID, key.ID)
	return req, nil
}

// dumpStorage reads the object's whole storage (GET /__storage).
func dumpStorage(ctx context.Context, hc *http.Client, key store.ObjectKey) (map[string]json.RawMessage, error) {
	req, err := storageRequest(ctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, targetErr(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, err
	}
	if err := proxyError(resp, body); err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("GET /__storage answered HTTP %d: %.200s", resp.StatusCode, body)
	}
	st := map[string]json.RawMessage{}
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("GET /__storage: not a JSON object of key → value: %w", err)
	}
	return st, nil
}

// restoreStorage replaces the object's storage in the server (POST
// /__storage).
func restoreStorage(ctx context.Context, hc *http.Client, key store.ObjectKey, st map[string]json.RawMessage) error {
	if st == nil {
		st = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	req, err := storageRequest(ctx, http.MethodPost, key, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return storageDo(hc, req)
}

// forgetStorage drops the object's storage from the server's memory
// (DELETE /__storage): it hibernated or was deleted.
func forgetStorage(ctx context.Context, hc *http.Client, key store.ObjectKey) error {
	req, err := storageRequest(ctx, http.MethodDelete, key, nil)
	if err != nil {
		return err
	}
	return storageDo(hc, req)
}

func storageDo(hc *http.Client, req *http.Request) error {
	resp, err := hc.Do(req)
	if err != nil {
		return targetErr(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err := proxyError(resp, body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s /__storage answered HTTP %d: %.200s", req.Method, resp.StatusCode, body)
	}
	return nil
}

// startServer starts the class's init_command in the sandbox (in /app when
// app says the class's app is there), waits for GET /__health and injects
// the persisted storage. The server of a shared sandbox (shared) serves
// many objects: it must say so on GET /__health, and gets each object's
// storage when that object wakes (key.ID is "").
func (r *Runtime) startServer(ctx context.Context, c *guest.Client, cls *Class, key store.ObjectKey, tenantID string, app, shared bool) error {
	isolation := IsolationObject
	if shared {
		isolation = IsolationClass
	}
	env := map[string]string{
		"AGENTKERNEL_OBJECT_CLASS":     key.Class,
		"AGENTKERNEL_OBJECT_ID":        key.ID,
		"AGENTKERNEL_STORAGE_MODE":     cls.StorageMode,
		"AGENTKERNEL_OBJECT_PORT":      strconv.Itoa(ServerPort),
		"AGENTKERNEL_OBJECT_TENANT":    tenantID,
		"AGENTKERNEL_OBJECT_ISOLATION": isolation,
	}
	for k, v := range cls.Env {
		env[k] = v
	}
	req := guest.ExecRequest{Argv: cls.InitCommand, Env: env}
	if app {
		req.Cwd = sandbox.AppPath
	}
	p, err := c.StartProcess(ctx, req)
	if err != nil {
		return fmt.Errorf("start init_command %q: %w", cls.InitCommand, err)
	}
	hc := c.ObjectClient()
	deadline := time.Now().Add(serverStartTimeout)
	delay := 500 * time.Microsecond
	for i := 0; ; i++ {
		if ok, many := health(ctx, hc); ok {
			if shared && !many {
				return errSingleObjectServer(cls)
			}
			break
		}
		if i%8 == 7 {
			if pi, err := c.Process(ctx, p.ID); err == nil && !pi.Running {
				return fmt.Errorf("init_command %q exited (code %s) before answering GET /__health on :%d%s",
					cls.InitCommand, exitCode(pi), ServerPort, stderrTail(ctx, c, p.ID))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("init_command %q did not answer GET /__health on :%d within %s", cls.InitCommand, ServerPort, serverStartTimeout)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
	if shared {
		return nil
	}
	st, err := r.st.GetObjectStorage(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := restoreStorage(ctx, hc, key, st); err != nil {
		return fmt.Errorf("inject storage: %w", err)
	}
	return nil
}

// health asks GET /__health: ok once the server answers 2xx, many when it
// says it serves many objects (X-Agentkernel-Objects: many).
func health(ctx context.Context, hc *http.Client) (ok, many bool) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, "http://object/__health", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return false, false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode/100 == 2, strings.EqualFold(strings.TrimSpace(resp.Header.Get(HeaderObjects)), "many")
}

func exitCode(p *guest.ProcessInfo) string {
	if p.ExitCode == nil {
		return "?"
	}
	return strconv.Itoa(*p.ExitCode)
}

func stderrTail(ctx context.Context, c *guest.Client, id string) string {
	out, err := c.ProcessOutput(ctx, guest.OutputRequest{ID: id, Stream: "stderr"})
	if err != nil || len(out.Data) == 0 {
		return ""
	}
	d := out.Data
	if len(d) > 2000 {
		d = d[len(d)-2000:]
	}
	return ": stderr: " + strings.TrimSpace(string(d))
}
