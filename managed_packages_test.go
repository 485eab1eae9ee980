package agentkernel_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// makeWheel builds a pure-Python wheel of one module whose hello()
// returns greeting.
func makeWheel(t testing.TB, name, version, greeting string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	distInfo := name + "-" + version + ".dist-info"
	files := []struct{ path, body string }{
		{name + "/__init__.py", fmt.Sprintf("def hello():\n    return %q\n", greeting)},
		{distInfo + "/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{distInfo + "/WHEEL", "Wheel-Version: 1.0\nGenerator: agentkernel-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(h[:]), len(f.body))
	}
	record.WriteString(distInfo + "/RECORD,,\n")
	w, err := zw.Create(distInfo + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return name + "-" + version + "-py3-none-any.whl", buf.Bytes()
}

// pipIndex serves wheels as a PEP 503 simple index; a wheel is served
// once gate is closed (nil: at once), so a test can hold a build mid-way.
type pipIndex struct {
	wheels map[string][]byte // project → file name + body
	names  map[string]string
	gate   chan struct{}
	mu     sync.Mutex
	gets   map[string]int
}

func (p *pipIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.gets[r.URL.Path]++
	p.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/simple/"):
		project := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
		body, ok := p.wheels[project]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := sha256.Sum256(body)
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", p.names[project], hex.EncodeToString(h[:]), p.names[project])
	case strings.HasPrefix(r.URL.Path, "/files/"):
		file := strings.TrimPrefix(r.URL.Path, "/files/")
		for project, name := range p.names {
			if name == file {
				if p.gate != nil {
					select {
					case <-p.gate:
					case <-r.Context().Done():
						return
					}
				}
				w.Write(p.wheels[project])
				return
			}
		}
		http.NotFound(w, r)
	default:
		http.NotFound(w, r)
	}
}

// makeNpmTarball is an npm package tarball of one module whose hello()
// returns greeting.
func makeNpmTarball(t testing.TB, name, version, greeting string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ path, body string }{
		{"package/package.json", fmt.Sprintf(`{"name":%q,"version":%q,"main":"index.js"}`, name, version)},
		{"package/index.js", fmt.Sprintf("exports.hello = () => %q;\n", greeting)},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.path, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// npmRegistry serves one package the way the npm registry does: its
// packument at /<name> and its tarball.
func npmRegistry(t testing.TB, name, version string, tarball []byte) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/" + name:
			sum := sha512.Sum512(tarball)
			sha := sha1.Sum(tarball)
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"name": name, "dist-tags": map[string]string{"latest": version},
				"versions": map[string]any{version: map[string]any{"name": name, "version": version,
					"dist": map[string]string{"tarball": srv.URL + "/" + name + "/-/" + name + "-" + version + ".tgz",
						"shasum": hex.EncodeToString(sha[:]), "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}}},
			})
		case "/" + name + "/-/" + name + "-" + version + ".tgz":
			w.Write(tarball)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// packagesBuild reads the environment's packages_build (an extra field
// of the SDK's environment object).
func packagesBuild(t *testing.T, e *anthropic.BetaEnvironment) map[string]any {
	t.Helper()
	f, ok := e.JSON.ExtraFields["packages_build"]
	if !ok {
		t.Fatalf("environment %s has no packages_build: %s", e.ID, e.RawJSON())
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(f.Raw()), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEnvironmentPackagesThroughTheSDK: an environment's pip package,
// from an index served on 127.0.0.1 by the test, is built once into the
// environment's layer; a session whose first tool call comes while it
// builds waits for it and then imports the package; the layer is
// read-only. A package the index lacks fails the build, which the
// environment shows and a session reports as session.error naming it.
func TestEnvironmentPackagesThroughTheSDK(t *testing.T) {
	// The build runs the sandbox's pip and npm: the host's /usr, which the
	// process driver's default image is.
	testenv.File(t, "/usr/lib/python3/dist-packages/pip", "apt-get install -y python3-pip")
	testenv.File(t, "/usr/bin/npm", "apt-get install -y npm")
	name, wheel := makeWheel(t, "akdemo", "1.0", "hello from akdemo")
	idx := &pipIndex{wheels: map[string][]byte{"akdemo": wheel}, names: map[string]string{"akdemo": name},
		gate: make(chan struct{}), gets: map[string]int{}}
	srv := httptest.NewServer(idx)
	defer srv.Close()
	npm := npmRegistry(t, "akdemo-js", "1.0.0", makeNpmTarball(t, "akdemo-js", "1.0.0", "hello from akdemo-js"))

	steps := []anthropictest.Turn{
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `python3 -c 'import akdemo; print(akdemo.hello(), akdemo.__file__)' 2>&1; node -e 'console.log(require("akdemo-js").hello())' 2>&1; touch /opt/agentkernel/packages/x 2>/dev/null && echo writable || echo read-only`}}}},
	}
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		if n := r.AssistantTurns(); n < len(steps) {
			return steps[n]
		}
		return anthropictest.Turn{Text: "done"}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
		c.Packages.PipIndexURL = srv.URL + "/simple"
		c.Packages.NpmRegistry = npm.URL + "/"
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "pkg", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	newEnvOf := func(pk anthropic.BetaPackagesParams) *anthropic.BetaEnvironment {
		t.Helper()
		e, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "pkg",
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{Packages: pk}}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	newPkgEnv := func(pip ...string) *anthropic.BetaEnvironment {
		t.Helper()
		return newEnvOf(anthropic.BetaPackagesParams{Pip: pip})
	}
	// runTurn sends a message and returns the tool results and session
	// errors of the turn; onToolUse runs when the model's tool call shows.
	runTurn := func(sessionID string, onToolUse func()) (results, errs []string) {
		t.Helper()
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream := c.Beta.Sessions.Events.StreamEvents(sctx, sessionID, anthropic.BetaSessionEventStreamParams{})
		defer stream.Close()
		if _, err := c.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("go")}}); err != nil {
			t.Fatal(err)
		}
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "agent.tool_use":
				if onToolUse != nil {
					onToolUse()
				}
			case "agent.tool_result":
				var b strings.Builder
				for _, blk := range ev.AsAgentToolResult().Content {
					b.WriteString(blk.Text)
				}
				results = append(results, b.String())
			case "session.error":
				errs = append(errs, ev.AsSessionError().Error.Message)
			case "session.status_idle":
				return results, errs
			}
		}
		t.Fatalf("stream ended: %v", stream.Err())
		return nil, nil
	}

	env := newPkgEnv("akdemo")
	if got := env.Config.Packages.Pip; len(got) != 1 || got[0] != "akdemo" {
		t.Fatalf("config.packages.pip = %v: %s", got, env.RawJSON())
	}
	// The wheel is held back, so the build cannot be done yet.
	if b := packagesBuild(t, env); b["status"] != "building" {
		t.Fatalf("packages_build at create: %v", b)
	}
	s := newSession(t, c, ag.ID, env.ID)
	var once sync.Once
	results, errs := runTurn(s.ID, func() { once.Do(func() { close(idx.gate) }) })
	if len(errs) != 0 || len(results) != 1 {
		t.Fatalf("results %q, session errors %q", results, errs)
	}
	if !strings.Contains(results[0], "hello from akdemo /opt/agentkernel/packages/python/akdemo/__init__.py") || !strings.Contains(results[0], "read-only") {
		t.Fatalf("tool result %q", results[0])
	}
	got, err := c.Beta.Environments.Get(ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if b := packagesBuild(t, got); b["status"] != "ready" {
		t.Fatalf("packages_build after the session: %v", b)
	}
	// Built once: a second environment with the same packages, and a
	// second session, download nothing again.
	env2 := newPkgEnv("akdemo")
	if b := packagesBuild(t, env2); b["status"] != "ready" {
		t.Fatalf("packages_build of an environment with the same packages: %v", b)
	}
	s2 := newSession(t, c, ag.ID, env2.ID)
	if results, errs := runTurn(s2.ID, nil); len(errs) != 0 || len(results) != 1 || !strings.Contains(results[0], "hello from akdemo") {
		t.Fatalf("second session: results %q, errors %q", results, errs)
	}
	idx.mu.Lock()
	downloads := idx.gets["/files/"+name]
	idx.mu.Unlock()
	if downloads != 1 {
		t.Fatalf("the wheel was downloaded %d times, want 1", downloads)
	}

	// The layer gone from this host (a restore on another disk): the next
	// session rebuilds it from the environment's packages.
	if err := os.RemoveAll(filepath.Join(d.Config.PackagesDir(), "layers")); err != nil {
		t.Fatal(err)
	}
	if results, errs := runTurn(newSession(t, c, ag.ID, env.ID).ID, nil); len(errs) != 0 || len(results) != 1 || !strings.Contains(results[0], "hello from akdemo") {
		t.Fatalf("session after the layer was lost: results %q, errors %q", results, errs)
	}
	idx.mu.Lock()
	downloads = idx.gets["/files/"+name]
	idx.mu.Unlock()
	if downloads != 2 {
		t.Fatalf("the wheel was downloaded %d times after the layer was lost, want 2", downloads)
	}

	// npm: a tarball from the local registry, required by name.
	jsEnv := newEnvOf(anthropic.BetaPackagesParams{Npm: []string{"akdemo-js@1.0.0"}})
	s4 := newSession(t, c, ag.ID, jsEnv.ID)
	if results, errs := runTurn(s4.ID, nil); len(errs) != 0 || len(results) != 1 || !strings.Contains(results[0], "hello from akdemo-js") || !strings.Contains(results[0], "read-only") {
		t.Fatalf("npm session: results %q, errors %q", results, errs)
	}

	// A package the index does not have: the build fails naming it.
	bad := newPkgEnv("akdemo-missing")
	s3 := newSession(t, c, ag.ID, bad.ID)
	results, errs = runTurn(s3.ID, nil)
	if strings.Contains(strings.Join(results, ""), "hello") || len(errs) != 1 || !strings.Contains(errs[0], `pip package "akdemo-missing" did not install`) {
		t.Fatalf("failing package: results %q, session errors %q", results, errs)
	}
	got, err = c.Beta.Environments.Get(ctx, bad.ID, anthropic.BetaEnvironmentGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	b := packagesBuild(t, got)
	if b["status"] != "failed" || !strings.Contains(fmt.Sprint(b["failed_package"]), "akdemo-missing") || !strings.Contains(fmt.Sprint(b["log_tail"]), "akdemo-missing") {
		t.Fatalf("packages_build of the failing environment: %v", b)
	}
}

// TestEnvironmentPackagesRefused: what cannot be built is refused at the
// API, naming the field.
func TestEnvironmentPackagesRefused(t *testing.T) {
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	for _, tc := range []struct {
		what    string
		pk      anthropic.BetaPackagesParams
		mention []string
	}{
		{"an option", anthropic.BetaPackagesParams{Pip: []string{"--index-url=http://evil/"}}, []string{"config.packages.pip[0]", "option"}},
		{"whitespace", anthropic.BetaPackagesParams{Npm: []string{"ok", "a b"}}, []string{"config.packages.npm[1]"}},
		{"apt", anthropic.BetaPackagesParams{Apt: []string{"curl"}}, []string{"config.packages.apt", "not supported yet"}},
	} {
		_, err := c.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: "bad",
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{Packages: tc.pk}}})
		wantStatus(t, tc.what, err, 400, tc.mention...)
	}
}
