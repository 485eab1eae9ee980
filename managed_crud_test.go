package agentkernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

func TestManagedAgentsThroughTheSDK(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)

	a := newAgent(t, c, "coder")
	if a.Type != "agent" || a.Version != 1 || a.Name != "coder" || a.Model.ID != testModel || len(a.Tools) != 1 ||
		a.Tools[0].Type != "agent_toolset_20260401" || !a.Tools[0].DefaultConfig.Enabled || a.ExecutionIdentity.Type != "service_account" ||
		a.CreatedAt.IsZero() || !a.ArchivedAt.IsZero() {
		t.Fatalf("created agent: %s", a.RawJSON())
	}
	got, err := c.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{})
	if err != nil || got.ID != a.ID || got.Name != "coder" {
		t.Fatalf("get: %v %v", got, err)
	}

	// Update writes version 2; the version precondition guards it.
	up, err := c.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{
		Version: anthropic.Int(1), System: anthropic.String("be brief"), Metadata: map[string]string{"team": "infra"},
	})
	if err != nil || up.Version != 2 || up.System != "be brief" || up.Metadata["team"] != "infra" || up.Name != "coder" {
		t.Fatalf("update: %v %v", up, err)
	}
	_, err = c.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1), Name: anthropic.String("x")})
	wantStatus(t, "stale version", err, 409, "version")
	same, err := c.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{System: anthropic.String("be brief")})
	if err != nil || same.Version != 2 {
		t.Fatalf("an update that changes nothing made version %d (%v)", same.Version, err)
	}
	v1, err := c.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: anthropic.Int(1)})
	if err != nil || v1.Version != 1 || v1.System != "" {
		t.Fatalf("get version 1: %v %v", v1, err)
	}
	_, err = c.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: anthropic.Int(9)})
	wantStatus(t, "missing version", err, 404, "version 9")

	versions := 0
	for v := range c.Beta.Agents.Versions.ListAutoPaging(ctx, a.ID, anthropic.BetaAgentVersionListParams{Limit: anthropic.Int(1)}).All() {
		if want := int64(2 - versions); v.Version != want {
			t.Fatalf("versions out of order: got %d, want %d", v.Version, want)
		}
		versions++
	}
	if versions != 2 {
		t.Fatalf("listed %d versions, want 2", versions)
	}

	// Pagination: five agents, two per page, each exactly once.
	for _, n := range []string{"b", "c", "d", "e"} {
		newAgent(t, c, n)
	}
	first, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(2)})
	if err != nil || len(first.Data) != 2 || first.NextPage == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	seen := map[string]bool{}
	for ag := range c.Beta.Agents.ListAutoPaging(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(2)}).All() {
		if seen[ag.ID] {
			t.Fatalf("agent %s listed twice", ag.ID)
		}
		seen[ag.ID] = true
	}
	if len(seen) != 5 {
		t.Fatalf("listed %d agents, want 5", len(seen))
	}

	arch, err := c.Beta.Agents.Archive(ctx, a.ID, anthropic.BetaAgentArchiveParams{})
	if err != nil || arch.ArchivedAt.IsZero() {
		t.Fatalf("archive: %v %v", arch, err)
	}
	_, err = c.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Name: anthropic.String("y")})
	wantStatus(t, "update archived", err, 409, "archived")
	page, err := c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(100)})
	if err != nil || len(page.Data) != 4 {
		t.Fatalf("list without archived: %d %v", len(page.Data), err)
	}
	page, err = c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(100), IncludeArchived: anthropic.Bool(true)})
	if err != nil || len(page.Data) != 5 {
		t.Fatalf("list with archived: %d %v", len(page.Data), err)
	}

	_, err = c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"}})
	wantStatus(t, "agent without a name", err, 400, `\"name\"`)
}

func TestManagedEnvironmentsThroughTheSDK(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)

	e, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{
		Name: "py", Description: anthropic.String("python"),
		Metadata: map[string]string{"agentkernel.driver": "process", "agentkernel.sleep_after": "2m", "owner": "me"},
		// "limited" with no hosts: nothing leaves the sandboxes.
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != "environment" || e.Name != "py" || e.Description != "python" || e.Config.Type != "cloud" ||
		e.Config.Networking.Type != "limited" || len(e.Config.Networking.AllowedHosts) != 0 || len(e.Config.Packages.Pip) != 0 ||
		e.Metadata["agentkernel.driver"] != "process" || e.CreatedAt == "" {
		t.Fatalf("created environment: %s", e.RawJSON())
	}
	// Networking is the egress proxy's policy: stored canonical, returned,
	// kept by an update that leaves it out.
	netEnv, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "net", Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
		Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{
			AllowedHosts: []string{"PyPI.org", "127.0.0.1:8443", "*.example.com"}, AllowMCPServers: anthropic.Bool(true)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := netEnv.Config.Networking; n.Type != "limited" || strings.Join(n.AllowedHosts, " ") != "pypi.org 127.0.0.1:8443 *.example.com" || !n.AllowMCPServers || n.AllowPackageManagers {
		t.Fatalf("limited networking: %s", netEnv.RawJSON())
	}
	netEnv, err = c.Beta.Environments.Update(ctx, netEnv.ID, anthropic.BetaEnvironmentUpdateParams{Name: anthropic.String("net2")})
	if err != nil || len(netEnv.Config.Networking.AllowedHosts) != 3 {
		t.Fatalf("update without config: %s %v", netEnv.RawJSON(), err)
	}
	netEnv, err = c.Beta.Environments.Update(ctx, netEnv.ID, anthropic.BetaEnvironmentUpdateParams{Config: anthropic.BetaEnvironmentUpdateParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
		Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfUnrestricted: &anthropic.BetaUnrestrictedNetworkParam{}}}}})
	if err != nil || netEnv.Config.Networking.Type != "unrestricted" {
		t.Fatalf("update to unrestricted: %s %v", netEnv.RawJSON(), err)
	}
	for _, bad := range []struct{ host, says string }{
		{"https://pypi.org", "a URL"}, {"pypi.org/simple", "path"}, {"pypi.org:0", "port"}, {"", "empty"},
	} {
		_, err = c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bad", Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"ok.example.com", bad.host}}}}}})
		wantStatus(t, "allowed_hosts "+bad.host, err, 400, "config.networking.allowed_hosts[1]", bad.says)
	}
	// What agentkernel cannot do yet is refused, not stored and ignored.
	_, err = c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "pkg", Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
		Packages: anthropic.BetaPackagesParams{Apt: []string{"curl"}}}}})
	wantStatus(t, "packages", err, 400, "config.packages.apt", "not supported yet")
	up, err := c.Beta.Environments.Update(ctx, e.ID, anthropic.BetaEnvironmentUpdateParams{
		Name: anthropic.String("py3"), Metadata: map[string]string{"owner": ""},
	})
	if err != nil || up.Name != "py3" || up.Metadata["owner"] != "" || len(up.Metadata) != 2 || up.Config.Networking.Type != "limited" {
		t.Fatalf("update: %s %v", up.RawJSON(), err)
	}
	got, err := c.Beta.Environments.Get(ctx, e.ID, anthropic.BetaEnvironmentGetParams{})
	if err != nil || got.Name != "py3" {
		t.Fatalf("get: %v %v", got, err)
	}
	_, err = c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bad", Metadata: map[string]string{"agentkernel.sleep_after": "soon"}})
	wantStatus(t, "bad sleep_after", err, 400, "agentkernel.sleep_after")

	other := newEnv(t, c, "other")
	seen := 0
	for range c.Beta.Environments.ListAutoPaging(ctx, anthropic.BetaEnvironmentListParams{Limit: anthropic.Int(1)}).All() {
		seen++
	}
	if seen != 3 {
		t.Fatalf("listed %d environments, want 3", seen)
	}
	arch, err := c.Beta.Environments.Archive(ctx, other.ID, anthropic.BetaEnvironmentArchiveParams{})
	if err != nil || arch.ArchivedAt == "" {
		t.Fatalf("archive: %v %v", arch, err)
	}
	del, err := c.Beta.Environments.Delete(ctx, e.ID, anthropic.BetaEnvironmentDeleteParams{})
	if err != nil || del.ID != e.ID || del.Type != "environment_deleted" {
		t.Fatalf("delete: %v %v", del, err)
	}
	_, err = c.Beta.Environments.Get(ctx, e.ID, anthropic.BetaEnvironmentGetParams{})
	wantStatus(t, "get deleted", err, 404, e.ID)
}

// The operator's [sandbox] network is the ceiling: with none, nothing an
// environment asks for leaves a sandbox, so asking is refused; so is an
// environment whose own metadata says none.
func TestEnvironmentNetworkingCeiling(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.Network = "none" })
	c := sdkClient(d, d.AdminKey)
	newNet := func(md map[string]string, n anthropic.BetaCloudConfigParamsNetworkingUnion) (*anthropic.BetaEnvironment, error) {
		return c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "n", Metadata: md,
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{Networking: n}}})
	}
	_, err := newNet(nil, anthropic.BetaCloudConfigParamsNetworkingUnion{OfUnrestricted: &anthropic.BetaUnrestrictedNetworkParam{}})
	wantStatus(t, "unrestricted under none", err, 400, "config.networking.type", `[sandbox] network = \"none\"`)
	_, err = newNet(nil, anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"pypi.org"}}})
	wantStatus(t, "allowed_hosts under none", err, 400, "config.networking.allowed_hosts", "[sandbox] network")
	_, err = newNet(nil, anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowPackageManagers: anthropic.Bool(true)}})
	wantStatus(t, "allow_package_managers under none", err, 400, "config.networking.allow_package_managers")
	e, err := newNet(nil, anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{}})
	if err != nil || e.Config.Networking.Type != "limited" || len(e.Config.Networking.AllowedHosts) != 0 {
		t.Fatalf("closed networking under none: %v %v", e, err)
	}
	_, err = newNet(map[string]string{"agentkernel.network": "egress"}, anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{}})
	wantStatus(t, "metadata egress under none", err, 400, "metadata.agentkernel.network", "no egress proxy")

	d2 := daemontest.Start(t)
	c2 := sdkClient(d2, d2.AdminKey)
	_, err = c2.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "n", Metadata: map[string]string{"agentkernel.network": "none"},
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{
			OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"pypi.org"}}}}}})
	wantStatus(t, "allowed_hosts with metadata network none", err, 400, "config.networking.allowed_hosts", "agentkernel.network = none")
	e2, err := c2.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "n", Metadata: map[string]string{"agentkernel.network": "egress"},
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{
			OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"pypi.org"}}}}}})
	if err != nil || len(e2.Config.Networking.AllowedHosts) != 1 {
		t.Fatalf("metadata egress with allowed_hosts: %v %v", e2, err)
	}
}

func TestManagedSessionsThroughTheSDK(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	a := newAgent(t, c, "coder")
	e := newEnv(t, c, "env")
	if _, err := c.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{System: anthropic.String("v2")}); err != nil {
		t.Fatal(err)
	}

	s := newSession(t, c, a.ID, e.ID)
	if s.Type != "session" || s.Status != "idle" || s.Agent.ID != a.ID || s.Agent.Version != 2 || s.Agent.System != "v2" ||
		s.EnvironmentID != e.ID || s.CreatedAt.IsZero() {
		t.Fatalf("created session: %s", s.RawJSON())
	}
	pinned, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfBetaManagedAgentsAgents: &anthropic.BetaManagedAgentsAgentParams{
			ID: a.ID, Type: anthropic.BetaManagedAgentsAgentParamsTypeAgent, Version: anthropic.Int(1)}},
		EnvironmentID: e.ID, Title: anthropic.String("pinned"),
	})
	if err != nil || pinned.Agent.Version != 1 || pinned.Agent.System != "" || pinned.Title != "pinned" {
		t.Fatalf("pinned session: %v %v", pinned, err)
	}
	got, err := c.Beta.Sessions.Get(ctx, s.ID, anthropic.BetaSessionGetParams{})
	if err != nil || got.ID != s.ID || got.Status != "idle" {
		t.Fatalf("get: %v %v", got, err)
	}
	up, err := c.Beta.Sessions.Update(ctx, s.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String("t"), Metadata: map[string]string{"k": "v"}})
	if err != nil || up.Title != "t" || up.Metadata["k"] != "v" {
		t.Fatalf("update: %v %v", up, err)
	}

	for range 3 {
		newSession(t, c, a.ID, e.ID)
	}
	seen := map[string]bool{}
	var order []string
	for ss := range c.Beta.Sessions.ListAutoPaging(ctx, anthropic.BetaSessionListParams{Limit: anthropic.Int(2)}).All() {
		if seen[ss.ID] {
			t.Fatalf("session %s listed twice", ss.ID)
		}
		seen[ss.ID] = true
		order = append(order, ss.ID)
	}
	if len(seen) != 5 || order[0] <= order[4] {
		t.Fatalf("listed %v, want 5 sessions newest first", order)
	}
	filtered, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{AgentID: anthropic.String(a.ID), AgentVersion: anthropic.Int(1)})
	if err != nil || len(filtered.Data) != 1 || filtered.Data[0].ID != pinned.ID {
		t.Fatalf("filter by agent version: %v %v", filtered, err)
	}
	idle, err := c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Statuses: []string{"running"}})
	if err != nil || len(idle.Data) != 0 {
		t.Fatalf("no session runs, yet the running filter found %d (%v)", len(idle.Data), err)
	}

	arch, err := c.Beta.Sessions.Archive(ctx, pinned.ID, anthropic.BetaSessionArchiveParams{})
	if err != nil || arch.ArchivedAt.IsZero() {
		t.Fatalf("archive: %v %v", arch, err)
	}
	_, err = c.Beta.Sessions.Update(ctx, pinned.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String("x")})
	wantStatus(t, "update archived session", err, 409, "archived")

	del, err := c.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{})
	if err != nil || del.ID != s.ID || del.Type != "session_deleted" {
		t.Fatalf("delete: %v %v", del, err)
	}
	_, err = c.Beta.Sessions.Get(ctx, s.ID, anthropic.BetaSessionGetParams{})
	wantStatus(t, "get deleted session", err, 404, s.ID)

	// References name what is missing.
	_, err = c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String("agent_nope")}, EnvironmentID: e.ID})
	wantStatus(t, "unknown agent", err, 404, "agent_nope")
	_, err = c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: "env_nope"})
	wantStatus(t, "unknown environment", err, 404, "env_nope")
}
