package agentkernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// counterAppDir is an app_dir holding the test counter server.
func counterAppDir(t *testing.T) string {
	return filepath.Dir(testenv.StaticBinary(t, "github.com/agentkernel/agentkernel/internal/object/testdata/counter"))
}

// objectDaemon starts a daemon with counter classes and small limits, and
// deletes every object (and so its sandbox) before it stops.
func objectDaemon(t *testing.T) (*daemontest.Daemon, *agentkernel.Client) {
	t.Helper()
	app := counterAppDir(t)
	d := daemontest.Start(t, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{
			{Class: "counter", InitCommand: []string{"/app/counter"}, AppDir: app},
			{Class: "wcounter", InitCommand: []string{"/app/counter"}, AppDir: app, StorageMode: "write-through"},
		}
		c.DurableObjects.AppRoots = []string{app}
		c.DurableObjects.MaxKeys = 5
		c.DurableObjects.MaxAlarms = 3
	})
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	t.Cleanup(func() {
		objs, _ := c.Objects.List(context.Background(), agentkernel.ObjectListParams{})
		for _, o := range objs {
			_ = c.Objects.Delete(context.Background(), o.Class, o.ID)
		}
	})
	return d, c
}

func objStatus(err error) int {
	var e *agentkernel.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

func value(t *testing.T, r agentkernel.ObjectResult) int64 {
	t.Helper()
	var v struct{ Value int64 }
	if err := r.Decode(&v); err != nil {
		t.Fatalf("result %s: %v", r, err)
	}
	return v.Value
}

func TestObjectsThroughTheSDK(t *testing.T) {
	ctx := context.Background()
	d, c := objectDaemon(t)
	for _, class := range []string{"counter", "wcounter"} {
		for i := 1; i <= 2; i++ {
			r, err := c.Objects.Call(ctx, class, "a", agentkernel.ObjectCall{Method: "increment", Args: map[string]any{"amount": 2}})
			if err != nil || value(t, r) != int64(2*i) {
				t.Fatalf("%s increment: %s %v", class, r, err)
			}
		}
		o, err := c.Objects.Hibernate(ctx, class, "a")
		if err != nil || o.Status != "Hibernating" {
			t.Fatalf("hibernate: %+v %v", o, err)
		}
		info, err := c.Objects.Get(ctx, class, "a")
		if err != nil || info.Status != "Hibernating" || string(info.Storage["count"]) != "4" {
			t.Fatalf("get hibernating: %+v %v", info, err)
		}
		r, err := c.Objects.Call(ctx, class, "a", agentkernel.ObjectCall{Method: "get"})
		if err != nil || value(t, r) != 4 {
			t.Fatalf("after wake: %s %v", r, err)
		}
	}
	// Checkpoint persists without hibernating.
	if _, err := c.Objects.Call(ctx, "counter", "a", agentkernel.ObjectCall{Method: "increment"}); err != nil {
		t.Fatal(err)
	}
	o, err := c.Objects.Checkpoint(ctx, "counter", "a")
	if err != nil || o.Status != "Active" || o.StorageKeys != 1 {
		t.Fatalf("checkpoint: %+v %v", o, err)
	}
	list, err := c.Objects.List(ctx, agentkernel.ObjectListParams{Class: "wcounter", Status: "Active"})
	if err != nil || len(list) != 1 || list[0].ID != "a" {
		t.Fatalf("list: %+v %v", list, err)
	}
	// The object's own error: its status and body, as they are.
	_, err = c.Objects.Call(ctx, "counter", "a", agentkernel.ObjectCall{Method: "fail", Args: map[string]any{"status": 409}})
	var oe *agentkernel.ObjectError
	if !errors.As(err, &oe) || oe.StatusCode != 409 || !strings.Contains(string(oe.Body), "failed on purpose") {
		t.Fatalf("object error: %v", err)
	}
	// Audit and metrics.
	recs, err := c.Objects.Audit(ctx, "ObjectWoken")
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit ObjectWoken: %+v %v", recs, err)
	}
	resp, err := http.Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`agentkernel_objects_active{class="counter"} 1`, `agentkernel_object_calls_total{class="counter",method="increment"} 3`,
		`agentkernel_object_hibernations_total{class="wcounter"} 1`, `agentkernel_object_wake_duration_seconds_count{class="counter"} 1`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// Delete removes the object; the next call starts from nothing.
	if err := c.Objects.Delete(ctx, "counter", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Objects.Get(ctx, "counter", "a"); !agentkernel.IsNotFound(err) {
		t.Fatalf("get deleted: %v", err)
	}
	r, err := c.Objects.Call(ctx, "counter", "a", agentkernel.ObjectCall{Method: "get"})
	if err != nil || value(t, r) != 0 {
		t.Fatalf("after delete: %s %v", r, err)
	}
}

func TestObjectDefinitionsAndAlarms(t *testing.T) {
	ctx := context.Background()
	_, c := objectDaemon(t)
	app := counterAppDir(t)
	def, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "mine", InitCommand: []string{"/app/counter"}, StorageMode: "write-through"})
	if err != nil || def.Source != "api" {
		t.Fatalf("define: %+v %v", def, err)
	}
	if _, err := c.Objects.UploadBundleDir(ctx, "mine", app); err != nil {
		t.Fatalf("upload the bundle: %v", err)
	}
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "counter", InitCommand: []string{"x"}}); objStatus(err) != 409 {
		t.Fatalf("redefining a config class: %v", err)
	}
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "x", StorageMode: "sometimes", InitCommand: []string{"x"}}); objStatus(err) != 400 || !strings.Contains(err.Error(), "storage_mode") {
		t.Fatalf("bad storage_mode: %v", err)
	}
	defs, err := c.Objects.Definitions(ctx)
	if err != nil || len(defs) != 3 {
		t.Fatalf("definitions: %+v %v", defs, err)
	}
	if r, err := c.Objects.Call(ctx, "mine", "x", agentkernel.ObjectCall{Method: "increment"}); err != nil || value(t, r) != 1 {
		t.Fatalf("call on an API class: %s %v", r, err)
	}

	// Alarms: replacement per method, the limit, deletion.
	at := time.Now().Add(time.Hour)
	a1, err := c.Objects.SetAlarm(ctx, "mine", "x", agentkernel.AlarmParams{Method: "increment", Args: map[string]any{"amount": 1}, FireAt: at})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.Objects.SetAlarm(ctx, "mine", "x", agentkernel.AlarmParams{Method: "increment", Args: map[string]any{"amount": 2}, FireAt: at})
	if err != nil {
		t.Fatal(err)
	}
	alarms, err := c.Objects.ListAlarms(ctx, "mine", "x")
	if err != nil || len(alarms) != 1 || alarms[0].ID != a2.ID || string(alarms[0].Args) != `{"amount":2}` {
		t.Fatalf("replacement: %+v %v (first %s)", alarms, err, a1.ID)
	}
	for _, m := range []string{"get", "echo"} {
		if _, err := c.Objects.SetAlarm(ctx, "mine", "x", agentkernel.AlarmParams{Method: m, FireAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Objects.SetAlarm(ctx, "mine", "x", agentkernel.AlarmParams{Method: "put", FireAt: at}); objStatus(err) != 422 || !strings.Contains(err.Error(), "durable_objects.max_alarms") {
		t.Fatalf("4th alarm over max_alarms=3: %v", err)
	}
	if err := c.Objects.DeleteAlarm(ctx, "mine", "x", a2.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Objects.DeleteAlarm(ctx, "mine", "x", a2.ID); !agentkernel.IsNotFound(err) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := c.Objects.DeleteDefinition(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Objects.Call(ctx, "mine", "x", agentkernel.ObjectCall{Method: "get"}); objStatus(err) != 404 || !strings.Contains(err.Error(), `"mine"`) {
		t.Fatalf("call after the class was deleted: %v", err)
	}
}

// Bad inputs get a 4xx naming the field or the limit.
func TestObjectBadInputs(t *testing.T) {
	ctx := context.Background()
	d, c := objectDaemon(t)
	cases := []struct {
		name string
		err  func() error
		code int
		want string
	}{
		{"unknown class", func() error {
			_, err := c.Objects.Call(ctx, "nosuch", "a", agentkernel.ObjectCall{Method: "get"})
			return err
		}, 404, `"nosuch"`},
		{"bad method", func() error {
			_, err := c.Objects.Call(ctx, "counter", "a", agentkernel.ObjectCall{Method: "__storage"})
			return err
		}, 400, `"method"`},
		{"bad id", func() error {
			_, err := c.Objects.Call(ctx, "counter", "-a", agentkernel.ObjectCall{Method: "get"})
			return err
		}, 400, `"id"`},
		{"args over 1 MB", func() error {
			_, err := c.Objects.Call(ctx, "counter", "a", agentkernel.ObjectCall{Method: "get", Args: strings.Repeat("x", 1<<20)})
			return err
		}, 413, "1048576"},
		{"6th key over max_keys=5", func() error {
			for i := range 5 {
				if _, err := c.Objects.Call(ctx, "wcounter", "k", agentkernel.ObjectCall{Method: "put", Args: map[string]any{"key": "k" + string(rune('0'+i)), "value": i}}); err != nil {
					return err
				}
			}
			_, err := c.Objects.Call(ctx, "wcounter", "k", agentkernel.ObjectCall{Method: "put", Args: map[string]any{"key": "k9", "value": 9}})
			return err
		}, 422, "durable_objects.max_keys"},
		{"hibernate unknown object", func() error {
			_, err := c.Objects.Hibernate(ctx, "counter", "never")
			return err
		}, 404, "counter/never"},
	}
	for _, tc := range cases {
		err := tc.err()
		if objStatus(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %d naming %s", tc.name, err, tc.code, tc.want)
		}
	}
	// The refused write left the store as it was: 5 keys.
	if o, err := c.Objects.Get(ctx, "wcounter", "k"); err != nil || len(o.Storage) != 5 || o.Storage["k9"] != nil {
		t.Fatalf("after the refused key: %+v %v", o, err)
	}
	// fire_at must be RFC 3339 (raw request: the SDK takes a time.Time).
	req, _ := http.NewRequest("POST", d.URL+"/v1/objects/counter/a/alarms", bytes.NewReader([]byte(`{"method":"get","fire_at":"tomorrow"}`)))
	req.Header.Set("x-api-key", d.AdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Error struct{ Message string } }
	_ = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(env.Error.Message, "fire_at") {
		t.Fatalf("fire_at not RFC 3339: %d %q", resp.StatusCode, env.Error.Message)
	}

	// Another tenant's object answers 404, like one that does not exist.
	if _, err := c.Objects.Call(ctx, "counter", "mine", agentkernel.ObjectCall{Method: "increment"}); err != nil {
		t.Fatal(err)
	}
	ten, err := c.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "o", TenantID: ten.ID})
	if err != nil {
		t.Fatal(err)
	}
	other := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(k.Secret))
	if _, err := other.Objects.Get(ctx, "counter", "mine"); !agentkernel.IsNotFound(err) {
		t.Fatalf("other tenant get: %v", err)
	}
	if err := other.Objects.Delete(ctx, "counter", "mine"); !agentkernel.IsNotFound(err) {
		t.Fatalf("other tenant delete: %v", err)
	}
	if _, err := other.Objects.ListAlarms(ctx, "counter", "mine"); !agentkernel.IsNotFound(err) {
		t.Fatalf("other tenant alarms: %v", err)
	}
	if objs, err := other.Objects.List(ctx, agentkernel.ObjectListParams{}); err != nil || len(objs) != 0 {
		t.Fatalf("other tenant list: %+v %v", objs, err)
	}
}

// isolation = "class" through the API (issue 15): the definition takes
// and shows isolation and objects_per_sandbox, refuses bad values naming
// the field, and its objects share a sandbox.
func TestObjectClassIsolationThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	_, c := objectDaemon(t)
	def, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "shared", InitCommand: []string{"/app/counter"}, Isolation: "class", ObjectsPerSandbox: 10})
	if err != nil || def.Isolation != "class" || def.ObjectsPerSandbox != 10 {
		t.Fatalf("define: %+v %v", def, err)
	}
	got, err := c.Objects.Definition(ctx, "shared")
	if err != nil || got.Isolation != "class" || got.ObjectsPerSandbox != 10 {
		t.Fatalf("GET definition: %+v %v", got, err)
	}
	if cfg, err := c.Objects.Definition(ctx, "counter"); err != nil || cfg.Isolation != "object" {
		t.Fatalf("a config class's isolation: %+v %v", cfg, err)
	}
	for _, bad := range []struct {
		def   agentkernel.ObjectClass
		field string
	}{
		{agentkernel.ObjectClass{Class: "x", InitCommand: []string{"x"}, Isolation: "tenant"}, "isolation"},
		{agentkernel.ObjectClass{Class: "x", InitCommand: []string{"x"}, ObjectsPerSandbox: 5}, "objects_per_sandbox"},
		{agentkernel.ObjectClass{Class: "x", InitCommand: []string{"x"}, Isolation: "class", ObjectsPerSandbox: 10001}, "objects_per_sandbox"},
	} {
		if _, err := c.Objects.Define(ctx, bad.def); objStatus(err) != 400 || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("define %+v: %v, want a 400 naming %s", bad.def, err, bad.field)
		}
	}
	if _, err := c.Objects.UploadBundleDir(ctx, "shared", counterAppDir(t)); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b"} {
		if r, err := c.Objects.Call(ctx, "shared", id, agentkernel.ObjectCall{Method: "increment", Args: map[string]any{"amount": i + 1}}); err != nil || value(t, r) != int64(i+1) {
			t.Fatalf("call %s: %s %v", id, r, err)
		}
	}
	a, err := c.Objects.Get(ctx, "shared", "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Objects.Get(ctx, "shared", "b")
	if err != nil || a.SandboxID != b.SandboxID || string(a.Storage["count"]) != "1" || string(b.Storage["count"]) != "2" {
		t.Fatalf("a %+v, b %+v (%v): want one sandbox, own storage", a, b, err)
	}
}

// A class switched from isolation "object" to "class" keeps its objects'
// storage: a hibernated object wakes in the shared sandbox, and the
// sandbox it had of its own is destroyed.
func TestObjectClassSwitchedToClassIsolation(t *testing.T) {
	ctx := context.Background()
	_, c := objectDaemon(t)
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "switch", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Objects.UploadBundleDir(ctx, "switch", counterAppDir(t)); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "switch", "a", agentkernel.ObjectCall{Method: "increment", Args: map[string]any{"amount": 3}}); err != nil || value(t, r) != 3 {
		t.Fatalf("increment: %s %v", r, err)
	}
	o, err := c.Objects.Hibernate(ctx, "switch", "a")
	if err != nil {
		t.Fatal(err)
	}
	own := o.SandboxID
	if _, err := c.Objects.Define(ctx, agentkernel.ObjectClass{Class: "switch", InitCommand: []string{"/app/counter"}, Isolation: "class"}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Objects.Call(ctx, "switch", "a", agentkernel.ObjectCall{Method: "get"}); err != nil || value(t, r) != 3 {
		t.Fatalf("get after the switch: %s %v", r, err)
	}
	o, err = c.Objects.Get(ctx, "switch", "a")
	if err != nil || o.SandboxID == own || o.Status != "Active" {
		t.Fatalf("after the switch: %+v %v (own sandbox was %s)", o, err, own)
	}
	sb, err := c.Sandboxes.Get(ctx, o.SandboxID)
	if err != nil || !strings.HasPrefix(sb.SessionKey, "dc-switch-") {
		t.Fatalf("the object's sandbox after the switch: %+v %v", sb, err)
	}
	if sb, err := c.Sandboxes.Get(ctx, own); objStatus(err) != 404 && (err != nil || sb.State != "destroyed") {
		t.Fatalf("its own sandbox after the switch: %+v %v", sb, err)
	}
}
