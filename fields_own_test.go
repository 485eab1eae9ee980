package agentkernel_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/api"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// managedBodies are the SDK types TestEveryManagedFieldWorksOrIsRefused
// (and, for vaults, memory stores and deployments,
// TestEveryVaultFieldWorksOrIsRefused, TestEveryMemoryFieldWorksOrIsRefused
// and TestEveryDeploymentFieldWorksOrIsRefused) walks, by the
// name internal/api gives them.
var managedBodies = []string{"BetaAgentNewParams", "BetaAgentUpdateParams", "BetaEnvironmentNewParams",
	"BetaEnvironmentUpdateParams", "BetaSessionNewParams", "BetaSessionUpdateParams", "BetaSessionEventSendParams",
	"BetaSessionResourceAddParams", "BetaSessionResourceUpdateParams",
	"BetaVaultNewParams", "BetaVaultUpdateParams", "BetaVaultCredentialNewParams", "BetaVaultCredentialUpdateParams",
	"BetaMemoryStoreNewParams", "BetaMemoryStoreUpdateParams", "BetaMemoryStoreMemoryNewParams", "BetaMemoryStoreMemoryUpdateParams",
	"BetaDeploymentNewParams", "BetaDeploymentUpdateParams"}

// TestEveryRequestFieldWorksOrIsRefused does for agentkernel's own request
// bodies what TestEveryManagedFieldWorksOrIsRefused does for the Managed
// Agents ones: every field of every body type internal/api decodes (found
// by reflection) is sent with a non-default value, and must have an effect
// this test observes or be refused naming it. Every route the server
// serves is accounted for: a route with a body is walked (or, for Managed
// Agents bodies, is one the other test walks), and every other route
// except GET refuses a body.
func TestEveryRequestFieldWorksOrIsRefused(t *testing.T) {
	w := newOwnWalker(t)
	bodies := api.RequestBodies()
	for _, p := range w.d.Server().Patterns() {
		method, _, _ := strings.Cut(p, " ")
		if method == "GET" || method == "HEAD" || !strings.HasPrefix(p, method+" /") {
			continue
		}
		b, ok := bodies[p]
		switch v := b.(type) {
		case nil:
			// A route without a body refuses one rather than ignoring it.
			path := strings.NewReplacer("{path...}", "x", "{", "", "}", "").Replace(strings.TrimPrefix(p, method+" "))
			code, out := call(t, method, w.d.URL+path, w.d.AdminKey, `{"walk":1}`, "Content-Type", "application/json")
			if typ, msg := errType(out); code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, "takes no request body") {
				t.Errorf("%s with a body: %d %q, want a 400 saying it takes none", p, code, msg)
			}
			continue
		case api.ManagedBody:
			if !slices.Contains(managedBodies, string(v)) {
				t.Errorf("%s reads %s, which TestEveryManagedFieldWorksOrIsRefused does not walk", p, v)
			}
			continue
		case api.RawBody:
			continue // a file's content, an object bundle: tested by their own tests
		}
		if !ok {
			continue
		}
		typ := reflect.TypeOf(b)
		for _, l := range walkFields(typ) {
			r, found := classify(ownRules(w), p, l)
			if !found {
				t.Errorf("%s %s (%v): no rule says what this field does; make it work and check it here, or refuse it", p, l.path, l.typ)
				continue
			}
			c := w.newCase(t, p, typ, l, r)
			if r.check != nil {
				r.check(t, c)
			} else {
				expectRefused(t, c, r.refused)
			}
		}
	}
	for p := range bodies {
		if !slices.Contains(w.d.Server().Patterns(), p) {
			t.Errorf("api.RequestBodies lists %s, which the server does not serve", p)
		}
	}
}

// ownWalker is a daemon with a counter object class, one sandbox and one
// ticket the bodies' routes refer to.
type ownWalker struct {
	*managedWalker
	app     string
	sandbox string
	ticket  string
}

func newOwnWalker(t *testing.T) *ownWalker {
	w := &ownWalker{managedWalker: &managedWalker{}, app: counterAppDir(t)}
	w.d = daemontest.Start(t, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{{Class: "counter", InitCommand: []string{"/app/counter"}, AppDir: w.app}}
		c.Sandbox.AllowHostNetwork = true // the .network rules ask for the host's
		c.DurableObjects.AppRoots = []string{w.app}
	})
	t.Cleanup(func() {
		_, out := w.do(t, "GET", "/v1/objects", nil)
		objs, _ := out["data"].([]any)
		for _, o := range objs {
			m := o.(map[string]any)
			w.do(t, "DELETE", fmt.Sprintf("/v1/objects/%s/%s", m["class"], m["id"]), nil)
		}
	})
	w.sandbox = w.create(t, "/v1/sandboxes", map[string]any{})["id"].(string)
	w.ticket = w.create(t, "/v1/tickets", map[string]any{"title": "walk"})["id"].(string)
	return w
}

// create must succeed (200 or 201).
func (w *ownWalker) create(t *testing.T, path string, body any) map[string]any {
	t.Helper()
	code, out := w.do(t, "POST", path, body)
	if code != 200 && code != 201 {
		t.Fatalf("POST %s %v: %d %v", path, body, code, out)
	}
	return out
}

func (w *ownWalker) get(t *testing.T, path string) map[string]any {
	t.Helper()
	code, out := w.do(t, "GET", path, nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %v", path, code, out)
	}
	return out
}

// exec runs a shell command in a sandbox and returns its stdout.
func (w *ownWalker) exec(t *testing.T, sandbox, cmd string) string {
	t.Helper()
	out := w.create(t, "/v1/sandboxes/"+sandbox+"/exec", map[string]any{"command": cmd})
	s, _ := out["stdout"].(string)
	return s
}

// await polls get until ok holds (the monitor and the task launcher work
// in the background).
func (w *ownWalker) await(t *testing.T, path string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := w.get(t, path)
		if ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never got there: %v", path, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newCase prepares one field of one of agentkernel's own bodies. A rule's
// value may be a func that sets up what the body refers to.
func (w *ownWalker) newCase(t *testing.T, route string, typ reflect.Type, l leaf, r fieldRule) *fieldCase {
	c := &fieldCase{body: route, leaf: l, marker: w.marker(), state: map[string]any{}}
	c.value = r.valueFor(t, c)
	path := strings.TrimPrefix(route, "POST ")
	path = strings.NewReplacer("{id}", w.sandbox, "{class}", "counter").Replace(path)
	switch {
	case strings.HasPrefix(route, "POST /v1/objects/{class}"):
		path = fmt.Sprintf("/v1/objects/counter/walk-%s/%s", c.marker, path[strings.LastIndex(path, "/")+1:])
	case strings.HasPrefix(route, "POST /v1/tickets/{id}"):
		path = "/v1/tickets/" + w.ticket + "/results"
	case strings.HasPrefix(route, "POST /v1/environments/{id}/work/"):
		env, _ := c.state["env"].(string)
		work, _ := c.state["work"].(string)
		path = strings.NewReplacer(w.sandbox, env, "{work_id}", work).Replace(path)
	case strings.HasPrefix(route, "POST /v1/sessions/{id}/"):
		sid, _ := c.state["session"].(string)
		path = "/v1/sessions/" + sid + path[strings.LastIndex(path, "/"):]
	}
	c.send = func() (int, map[string]any) {
		body := map[string]any{}
		if b, ok := c.state["base"].(map[string]any); ok {
			for k, v := range b {
				body[k] = v
			}
		}
		for k, v := range synth(t, typ, l.steps, c.value, func(string) (any, bool) { return nil, false }).(map[string]any) {
			body[k] = v
		}
		c.state["sent"] = body
		return w.do(t, "POST", path, body)
	}
	return c
}

// hostedEnv is a self_hosted environment.
func (w *ownWalker) hostedEnv(t *testing.T) string {
	return w.create(t, "/v1/environments", map[string]any{"name": "walk-hosted", "config": map[string]any{"type": "self_hosted"}})["id"].(string)
}

// ackedWork is the work of a new session of a self_hosted environment,
// polled and acked (state env and work).
func (w *ownWalker) ackedWork(t *testing.T, c *fieldCase) {
	t.Helper()
	env := w.hostedEnv(t)
	w.create(t, "/v1/sessions", map[string]any{"agent": w.agent(t, nil), "environment_id": env})
	code, item := w.do(t, "GET", "/v1/environments/"+env+"/work/poll", nil)
	if code != 200 || item == nil || item["id"] == nil {
		t.Fatalf("poll: %d %v", code, item)
	}
	if code, out := w.do(t, "POST", "/v1/environments/"+env+"/work/"+item["id"].(string)+"/ack", nil); code != 200 || out["state"] != "starting" {
		t.Fatalf("ack: %d %v", code, out)
	}
	c.state["env"], c.state["work"] = env, item["id"].(string)
}

// walkSession is a session with one ended turn (no model serves the walk
// model: it ends with session.error), for fork and rewind.
func (w *ownWalker) walkSession(t *testing.T) (string, []map[string]any) {
	t.Helper()
	if w.envID == "" {
		w.envID = w.create(t, "/v1/environments", map[string]any{"name": "walk"})["id"].(string)
	}
	sid := w.session(t, w.agent(t, nil))
	return sid, w.say(t, sid, "walk")
}

// base sets the other fields a body needs besides the one being tried.
func base(b map[string]any) func(*fieldCase) {
	return func(c *fieldCase) { c.state["base"] = b }
}

// created sends the case and requires a 200 or 201.
func created(t *testing.T, c *fieldCase) map[string]any {
	t.Helper()
	code, out := c.send()
	if code != 200 && code != 201 {
		t.Errorf("%s %s = %v: %d %v, want it accepted", c.body, c.leaf.path, c.value, code, out)
		return nil
	}
	return out
}

// echoes checks that GET of what the case created (getPath of its
// answer) holds the value at path: for fields whose purpose is to be
// stored and reported.
func (w *ownWalker) echoes(getPath func(c *fieldCase, out map[string]any) string, path string, setup ...func(*fieldCase)) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		for _, s := range setup {
			s(c)
		}
		out := created(t, c)
		if out == nil {
			return
		}
		holds(t, c, path, jsonAt(w.get(t, getPath(c, out)), path), c.value)
	}
}

func byID(prefix string) func(*fieldCase, map[string]any) string {
	return func(_ *fieldCase, out map[string]any) string { return prefix + out["id"].(string) }
}

// taskSandbox waits for a task's sandbox and returns it.
func (w *ownWalker) taskSandbox(t *testing.T, taskID string) map[string]any {
	task := w.await(t, "/v1/tasks/"+taskID, func(m map[string]any) bool { return m["sandbox_id"] != nil || m["status"] == "failed" })
	if task["sandbox_id"] == nil {
		t.Fatalf("task %s failed: %v", taskID, task)
	}
	return w.get(t, "/v1/sandboxes/"+task["sandbox_id"].(string))
}

// taskLogs waits until the task's output holds s.
func (w *ownWalker) taskLogs(t *testing.T, c *fieldCase, taskID, s string) {
	w.taskSandbox(t, taskID)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, out := w.do(t, "GET", "/v1/tasks/"+taskID+"/logs", nil)
		if b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(out["data"])); strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s %s: the task's output never held %q: %v", c.body, c.leaf.path, s, out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restores checks a sandbox's backup key: a sandbox created with the same
// environment and session_key as a destroyed one gets its workspace back;
// one with a different environment does not.
func (w *ownWalker) restores(t *testing.T, c *fieldCase) {
	key := map[string]any{"environment": "env-" + c.marker, "session_key": "key-" + c.marker}
	c.value = key[strings.TrimPrefix(c.leaf.path, ".")]
	first := w.create(t, "/v1/sandboxes", key)["id"].(string)
	w.exec(t, first, "echo "+c.marker+" > kept.txt")
	if code, out := w.do(t, "DELETE", "/v1/sandboxes/"+first, nil); code != 200 {
		t.Fatalf("delete: %d %v", code, out)
	}
	c.state["base"] = key
	out := created(t, c)
	if out == nil {
		return
	}
	if got := w.exec(t, out["id"].(string), "cat kept.txt 2>/dev/null || true"); strings.TrimSpace(got) != c.marker {
		t.Errorf("%s %s: a sandbox with the same backup key did not get the workspace back: %q", c.body, c.leaf.path, got)
	}
	other := w.create(t, "/v1/sandboxes", map[string]any{"environment": "other-" + c.marker, "session_key": "key-" + c.marker})["id"].(string)
	if got := w.exec(t, other, "cat kept.txt 2>/dev/null || true"); got != "" {
		t.Errorf("%s %s: a sandbox of another environment got the workspace: %q", c.body, c.leaf.path, got)
	}
}

func ownRules(w *ownWalker) []fieldRule {
	sandboxGet := byID("/v1/sandboxes/")
	return []fieldRule{
		// Tenants and keys.
		rule(`^POST /v1/tenants \.name$`).does(w.echoes(byID("/v1/tenants/"), ".name")),
		rule(`^POST /v1/keys \.name$`).does(w.echoes(byID("/v1/keys/"), ".name")),
		rule(`^POST /v1/keys \.tenant_id$`).with(func(t *testing.T, c *fieldCase) any {
			return w.create(t, "/v1/tenants", map[string]any{"name": c.marker})["id"]
		}).does(func(t *testing.T, c *fieldCase) {
			c.state["base"] = map[string]any{"name": "walk"}
			out := created(t, c)
			if out == nil {
				return
			}
			code, keys := call(t, "GET", w.d.URL+"/v1/keys", out["secret"].(string), "")
			if data, _ := keys["data"].([]any); code != 200 || len(data) != 1 || jsonAt(data[0], ".tenant_id") != c.value {
				t.Errorf("a key of tenant %v sees keys %d %v", c.value, code, keys)
			}
		}),
		rule(`^POST /v1/keys \.admin$`).does(func(t *testing.T, c *fieldCase) {
			c.state["base"] = map[string]any{"name": "walk"}
			out := created(t, c)
			if out == nil {
				return
			}
			if code, body := call(t, "POST", w.d.URL+"/v1/tenants", out["secret"].(string), `{"name":"by-`+c.marker+`"}`); code != 201 && code != 200 {
				t.Errorf("an admin key could not create a tenant: %d %v", code, body)
			}
		}),

		rule(`^POST /v1/keys \.environment_id$`).with(func(t *testing.T, c *fieldCase) any {
			return w.hostedEnv(t)
		}).does(func(t *testing.T, c *fieldCase) {
			c.state["base"] = map[string]any{"name": "walk"}
			out := created(t, c)
			if out == nil {
				return
			}
			secret := out["secret"].(string)
			env := c.value.(string)
			if code, body := call(t, "GET", w.d.URL+"/v1/environments/"+env+"/work/stats", secret, ""); code != 200 {
				t.Errorf("an environment key cannot read its queue: %d %v", code, body)
			}
			if code, _ := call(t, "GET", w.d.URL+"/v1/agents", secret, ""); code != 403 {
				t.Errorf("an environment key reads agents: %d", code)
			}
		}),

		// The work queue of self_hosted environments.
		rule(`^POST /v1/environments/\{id\}/work/\{work_id\} \.metadata$`).with(func(t *testing.T, c *fieldCase) any {
			w.ackedWork(t, c)
			return map[string]any{"walk": c.marker}
		}).does(func(t *testing.T, c *fieldCase) {
			if out := created(t, c); out != nil {
				got := w.get(t, "/v1/environments/"+c.state["env"].(string)+"/work/"+c.state["work"].(string))
				holds(t, c, ".metadata.walk", jsonAt(got, ".metadata.walk"), c.marker)
			}
		}),
		rule(`^POST /v1/environments/\{id\}/work/\{work_id\}/stop \.force$`).with(func(t *testing.T, c *fieldCase) any {
			w.ackedWork(t, c)
			return true
		}).does(func(t *testing.T, c *fieldCase) {
			// Without force an acked item is stopping (its worker stops
			// it); with force it is stopped at once.
			if out := created(t, c); out != nil && (out["state"] != "stopped" || out["stopped_at"] == nil) {
				t.Errorf("%s force: %v, want stopped", c.body, out)
			}
		}),

		// Sandboxes.
		rule(`^POST /v1/sandboxes \.driver$`).with("docker").does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			got := w.get(t, "/v1/sandboxes/"+out["id"].(string))
			if got["driver"] != "docker" || jsonAt(got, ".runtime.running") != true {
				t.Errorf("a docker sandbox: %v", got)
			}
		}),
		// An image must have been imported; that the field is read shows in
		// an unknown one being refused by name.
		rule(`^POST /v1/sandboxes \.image$`).does(func(t *testing.T, c *fieldCase) {
			if code, out := c.send(); code != 422 || !strings.Contains(fmt.Sprint(out), c.marker) {
				t.Errorf("unknown image %s: %d %v, want a 422 naming it", c.marker, code, out)
			}
		}),
		rule(`^POST /v1/sandboxes \.sleep_after$`).with("90m").does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out != nil && w.get(t, sandboxGet(c, out))["sleep_after"] != "1h30m0s" {
				t.Errorf("sleep_after 90m not in force: %v", out)
			}
		}),
		rule(`^POST /v1/sandboxes \.network$`).with("host").does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			// /proc/net/dev has two header lines and one per interface: a
			// sandbox without network has only lo.
			if got := w.exec(t, out["id"].(string), "wc -l < /proc/net/dev"); strings.TrimSpace(got) == "3" {
				t.Errorf("a host-network sandbox sees only lo")
			}
		}),
		rule(`^POST /v1/sandboxes \.limits\.(memory_mb|pids|cpus)$`).with(func(t *testing.T, c *fieldCase) any {
			return map[string]any{".limits.memory_mb": 512, ".limits.pids": 200, ".limits.cpus": 1.5}[c.leaf.path]
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			// In force through cgroups or rlimits, or reported as not
			// enforced where the machine cannot (the runtime says which).
			got := w.get(t, sandboxGet(c, out))
			how := jsonAt(got, ".runtime.limits_applied")
			k := strings.TrimPrefix(c.leaf.path, ".limits.")
			if fmt.Sprint(jsonAt(got, c.leaf.path)) != fmt.Sprint(c.value) || (how != "cgroup" && how != "rlimit") {
				t.Errorf("limit %s=%v: %v applied by %v", k, c.value, jsonAt(got, ".limits"), how)
			}
		}),
		rule(`^POST /v1/sandboxes \.metadata$`).does(w.echoes(sandboxGet, ".metadata")),
		rule(`^POST /v1/sandboxes \.(environment|session_key)$`).does(w.restores),
		rule(`^POST /v1/sandboxes \.start$`).with(false).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out != nil && w.get(t, sandboxGet(c, out))["state"] != "cold" {
				t.Errorf("start: false left the sandbox %v", out["state"])
			}
		}),

		// Exec.
		rule(`^POST /v1/sandboxes/\{id\}/exec \.(command|argv\[\]|env|cwd|timeout_ms|background)$`).with(func(t *testing.T, c *fieldCase) any {
			switch c.leaf.path {
			case ".command":
				return "echo " + c.marker
			case ".argv[]":
				return "pwd"
			case ".env":
				c.state["base"] = map[string]any{"command": "echo $WALK"}
				return map[string]string{"WALK": c.marker}
			case ".cwd":
				c.state["base"] = map[string]any{"command": "pwd"}
				return "/tmp"
			case ".timeout_ms":
				c.state["base"] = map[string]any{"command": "sleep 60"}
				return 100
			}
			c.state["base"] = map[string]any{"command": "sleep 60"}
			return true
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			want := map[string]string{".command": c.marker + "\n", ".argv[]": "/workspace\n", ".env": c.marker + "\n", ".cwd": "/tmp\n"}[c.leaf.path]
			switch c.leaf.path {
			case ".timeout_ms":
				if out["timed_out"] != true {
					t.Errorf("timeout_ms 100 on sleep 60: %v", out)
				}
			case ".background":
				id, _ := out["process_id"].(string)
				procs := w.get(t, "/v1/sandboxes/"+w.sandbox+"/processes")
				if id == "" || !strings.Contains(fmt.Sprint(procs), id) {
					t.Errorf("background exec: %v; processes %v", out, procs)
				}
				w.do(t, "POST", "/v1/sandboxes/"+w.sandbox+"/processes/"+id+"/kill", nil)
			default:
				if out["stdout"] != want {
					t.Errorf("exec %s=%v: stdout %q, want %q", c.leaf.path, c.value, out["stdout"], want)
				}
			}
		}),

		// Agent events reported for a sandbox: the monitor's input, listed back.
		rule(`^POST /v1/sandboxes/\{id\}/events \.(type|status|data|at)$`).with(func(t *testing.T, c *fieldCase) any {
			switch c.leaf.path {
			case ".type":
				return "agent.started"
			case ".status":
				c.state["base"] = map[string]any{"type": "agent.heartbeat"}
				return "degraded"
			case ".at":
				c.state["base"] = map[string]any{"type": "agent.tool_use"}
				return time.Now().UTC().Add(-time.Minute).Truncate(time.Second).Format(time.RFC3339)
			}
			c.state["base"] = map[string]any{"type": "agent.tool_use"}
			return map[string]any{"walk": c.marker}
		}).does(func(t *testing.T, c *fieldCase) {
			if created(t, c) == nil {
				return
			}
			evs, _ := w.get(t, "/v1/sandboxes/"+w.sandbox+"/events?limit=1000")["data"].([]any)
			last := evs[len(evs)-1]
			got := jsonAt(last, c.leaf.path)
			if c.leaf.path == ".at" {
				got = jsonAt(last, ".occurred_at")
				at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(got))
				want, _ := time.Parse(time.RFC3339, c.value.(string))
				if !at.Equal(want) {
					t.Errorf("event at %v, want %v", got, want)
				}
			} else if !sameJSON(got, c.value) {
				t.Errorf("event %s is %v, want %v", c.leaf.path, got, c.value)
			}
		}),

		// Durable object classes, calls and alarms.
		// A host directory is the operator's ([[objects]] in agentkernel.toml).
		rule(`^POST /v1/objects/definitions \.app_dir$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"class": "walk" + strings.TrimPrefix(c.marker, "walk-"), "init_command": []string{"/app/counter"}}
			return w.app
		}).refuse(`"app_dir"`),
		rule(`^POST /v1/objects/definitions \.(class|init_command\[\])$`).with(func(t *testing.T, c *fieldCase) any {
			class := "walk" + strings.TrimPrefix(c.marker, "walk-")
			c.state["class"] = class
			c.state["base"] = map[string]any{"class": class, "init_command": []string{"/app/counter"}}
			return map[string]any{".class": class, ".init_command[]": "/app/counter"}[c.leaf.path]
		}).does(func(t *testing.T, c *fieldCase) {
			if created(t, c) == nil {
				return
			}
			// The class runs: its init command, from its uploaded bundle, answers.
			sdk := agentkernel.New(agentkernel.WithBaseURL(w.d.URL), agentkernel.WithAPIKey(w.d.AdminKey))
			if _, err := sdk.Objects.UploadBundleDir(context.Background(), c.state["class"].(string), w.app); err != nil {
				t.Fatal(err)
			}
			out := w.create(t, "/v1/objects/"+c.state["class"].(string)+"/x/call", map[string]any{"method": "increment"})
			if !strings.Contains(fmt.Sprint(out), "1") {
				t.Errorf("a call on the defined class: %v", out)
			}
		}),
		rule(`^POST /v1/objects/definitions \.(image|driver|idle_timeout_seconds|max_concurrency|storage_mode|env)$`).with(func(t *testing.T, c *fieldCase) any {
			class := "walk" + strings.TrimPrefix(c.marker, "walk-")
			c.state["class"] = class
			c.state["base"] = map[string]any{"class": class, "init_command": []string{"/app/counter"}}
			switch c.leaf.path {
			case ".driver":
				return "docker"
			case ".image":
				return "agentkernel/sandbox:busybox"
			case ".storage_mode":
				return "write-through"
			}
			return nonDefault(t, c.leaf, c.marker)
		}).does(func(t *testing.T, c *fieldCase) {
			// Stored with the class and reported as in force for it.
			w.echoes(func(c *fieldCase, _ map[string]any) string {
				return "/v1/objects/definitions/" + c.state["class"].(string)
			}, c.leaf.path)(t, c)
		}),
		// isolation = "class" (issue 15): the class's objects share a
		// sandbox; objects_per_sandbox = 1 keeps them apart again.
		rule(`^POST /v1/objects/definitions \.(isolation|objects_per_sandbox)$`).with(func(t *testing.T, c *fieldCase) any {
			class := "walk" + strings.TrimPrefix(c.marker, "walk-")
			c.state["class"] = class
			base := map[string]any{"class": class, "init_command": []string{"/app/counter"}}
			c.state["base"] = base
			if c.leaf.path == ".objects_per_sandbox" {
				base["isolation"] = "class"
				return 1
			}
			return "class"
		}).does(func(t *testing.T, c *fieldCase) {
			w.echoes(func(c *fieldCase, _ map[string]any) string {
				return "/v1/objects/definitions/" + c.state["class"].(string)
			}, c.leaf.path)(t, c)
			class := c.state["class"].(string)
			sdk := agentkernel.New(agentkernel.WithBaseURL(w.d.URL), agentkernel.WithAPIKey(w.d.AdminKey))
			if _, err := sdk.Objects.UploadBundleDir(context.Background(), class, w.app); err != nil {
				t.Fatal(err)
			}
			sandboxes := map[string]bool{}
			for _, id := range []string{"x", "y"} {
				w.create(t, "/v1/objects/"+class+"/"+id+"/call", map[string]any{"method": "increment"})
				o, err := sdk.Objects.Get(context.Background(), class, id)
				if err != nil {
					t.Fatal(err)
				}
				sandboxes[o.SandboxID] = true
			}
			if want := map[string]int{".isolation": 1, ".objects_per_sandbox": 2}[c.leaf.path]; len(sandboxes) != want {
				t.Errorf("%s = %v: two objects in %d sandboxes, want %d", c.leaf.path, c.value, len(sandboxes), want)
			}
		}),
		rule(`^POST /v1/objects/\{class\}/\{id\}/call \.(method|args)$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"method": "increment"}
			if c.leaf.path == ".args" {
				return map[string]any{"amount": 5}
			}
			return "increment"
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			want := map[string]string{".method": "1", ".args": "5"}[c.leaf.path]
			if out != nil && !strings.Contains(fmt.Sprint(out), want) {
				t.Errorf("call %s=%v: %v, want the counter at %s", c.leaf.path, c.value, out, want)
			}
		}),
		rule(`^POST /v1/objects/\{class\}/\{id\}/alarms \.(method|args|fire_at)$`).with(func(t *testing.T, c *fieldCase) any {
			at := time.Now().UTC().Add(time.Hour).Truncate(time.Second).Format(time.RFC3339)
			c.state["base"] = map[string]any{"method": "increment", "fire_at": at}
			return map[string]any{".method": "get", ".args": map[string]any{"amount": 7}, ".fire_at": at}[c.leaf.path]
		}).does(func(t *testing.T, c *fieldCase) {
			if created(t, c) == nil {
				return
			}
			sent := c.state["sent"].(map[string]any)
			list := w.get(t, "/v1/objects/counter/walk-"+c.marker+"/alarms")
			a := jsonAt(list, ".data[0]")
			if jsonAt(a, ".method") != sent["method"] || (c.leaf.path == ".args" && !sameJSON(jsonAt(a, ".args"), c.value)) {
				t.Errorf("alarm %s=%v: listed %v", c.leaf.path, c.value, list)
			}
			if c.leaf.path == ".fire_at" {
				at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(jsonAt(a, ".fire_at")))
				want, _ := time.Parse(time.RFC3339, c.value.(string))
				if !at.Equal(want) {
					t.Errorf("alarm fires at %v, want %v", jsonAt(a, ".fire_at"), c.value)
				}
			}
		}),

		// Tasks: an agent command run in a sandbox of its own.
		rule(`^POST /v1/tasks \.(command\[\]|env)$`).with(func(t *testing.T, c *fieldCase) any {
			if c.leaf.path == ".env" {
				c.state["base"] = map[string]any{"command": []string{"/bin/sh", "-c", "echo $WALK; sleep 60"}}
				return map[string]string{"WALK": c.marker}
			}
			return "pwd"
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			want := map[string]string{".command[]": "/workspace", ".env": c.marker}[c.leaf.path]
			w.taskLogs(t, c, out["id"].(string), want)
		}),
		rule(`^POST /v1/tasks \.ticket_id$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"command": []string{"true"}}
			return w.ticket
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out != nil && !strings.Contains(fmt.Sprint(w.get(t, "/v1/tickets/"+w.ticket)["tasks"]), out["id"].(string)) {
				t.Errorf("the task is not among its ticket's tasks")
			}
		}),
		rule(`^POST /v1/tasks \.sandbox\.(driver|network|limits\.(memory_mb|pids|cpus))$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"command": []string{"sleep", "60"}}
			return map[string]any{".sandbox.driver": "docker", ".sandbox.network": "host", ".sandbox.limits.memory_mb": 512,
				".sandbox.limits.pids": 200, ".sandbox.limits.cpus": 1.5}[c.leaf.path]
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			sb := w.taskSandbox(t, out["id"].(string))
			if got := jsonAt(sb, strings.TrimPrefix(c.leaf.path, ".sandbox")); fmt.Sprint(got) != fmt.Sprint(c.value) {
				t.Errorf("task sandbox %s is %v, want %v", c.leaf.path, got, c.value)
			}
		}),
		rule(`^POST /v1/tasks \.sandbox\.image$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"command": []string{"true"}}
			return "walk-no-image-" + c.marker
		}).does(func(t *testing.T, c *fieldCase) {
			// Checked at create, like a sandbox's: an unknown one is refused
			// by name, so the field is read.
			if code, out := c.send(); code != 422 || !strings.Contains(fmt.Sprint(out), c.marker) {
				t.Errorf("a task on an unknown image %s: %d %v, want a 422 naming it", c.marker, code, out)
			}
		}),
		rule(`^POST /v1/tasks \.sandbox\.workspace_from$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"command": []string{"true"}}
			return "sbx_" + c.marker
		}).does(func(t *testing.T, c *fieldCase) {
			// The monitor sets it on diagnostics; a client may not choose
			// what workspace a task starts with.
			if code, out := c.send(); code != 422 || !strings.Contains(fmt.Sprint(out), "sandbox.workspace_from") {
				t.Errorf("a task naming a workspace to clone: %d %v, want a 422 naming the field", code, out)
			}
		}),
		rule(`^POST /v1/tasks \.transcript_path$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"command": []string{"true"}}
			return "/workspace/transcript.txt"
		}).does(w.echoes(byID("/v1/tasks/"), ".transcript_path")),

		// Tickets and their results.
		// Fork and rewind start from the event named.
		rule(`^POST /v1/sessions/\{id\}/(fork|rewind) \.event_id$`).with(func(t *testing.T, c *fieldCase) any {
			sid, evs := w.walkSession(t)
			c.state["session"] = sid
			return evs[0]["id"]
		}).does(func(t *testing.T, c *fieldCase) {
			out := created(t, c)
			if out == nil {
				return
			}
			lin, key := out["lineage"], "forked_from"
			if strings.HasSuffix(c.body, "/rewind") {
				lin, key = out["branch"].(map[string]any)["lineage"], "branch_of"
			}
			if at := jsonAt(lin, "."+key+".at_seq"); at != 1.0 {
				t.Errorf("%s .event_id = the first event: lineage %v, want it at seq 1", c.body, lin)
			}
		}),
		// Webhooks: types that never fire during the walk, so nothing is sent.
		rule(`^POST /v1/webhooks \.url$`).with("https://hooks.invalid/walk").does(
			w.echoes(byID("/v1/webhooks/"), ".url", base(map[string]any{"event_types": []string{"session.status_terminated"}}))),
		rule(`^POST /v1/webhooks \.description$`).does(w.echoes(byID("/v1/webhooks/"), ".description",
			base(map[string]any{"url": "https://hooks.invalid/walk", "event_types": []string{"session.status_terminated"}}))),
		rule(`^POST /v1/webhooks \.event_types\[\]$`).with("session.status_terminated").does(func(t *testing.T, c *fieldCase) {
			c.state["base"] = map[string]any{"url": "https://hooks.invalid/walk"}
			out := created(t, c)
			if out == nil {
				return
			}
			if got := fmt.Sprint(jsonAt(w.get(t, "/v1/webhooks/"+out["id"].(string)), ".event_types")); got != "[session.status_terminated]" {
				t.Errorf("%s .event_types: stored %s", c.body, got)
			}
		}),
		rule(`^POST /v1/tickets \.(title|description)$`).does(func(t *testing.T, c *fieldCase) {
			c.state["base"] = map[string]any{"title": "walk"}
			w.echoes(byID("/v1/tickets/"), c.leaf.path)(t, c)
		}),
		rule(`^POST /v1/tickets \.metadata$`).does(w.echoes(byID("/v1/tickets/"), ".metadata", base(map[string]any{"title": "walk"}))),
		rule(`^POST /v1/tickets/\{id\}/results \.(task_id|result|validation_status|validation_note)$`).with(func(t *testing.T, c *fieldCase) any {
			c.state["base"] = map[string]any{"result": map[string]any{"ok": true}}
			switch c.leaf.path {
			case ".validation_status":
				return "valid"
			case ".task_id":
				return w.create(t, "/v1/tasks", map[string]any{"ticket_id": w.ticket, "command": []string{"true"}})["id"]
			}
			return nonDefault(t, c.leaf, c.marker)
		}).does(func(t *testing.T, c *fieldCase) {
			w.echoes(func(*fieldCase, map[string]any) string { return "/v1/tickets/" + w.ticket }, ".result"+c.leaf.path)(t, c)
		}),
	}
}
