package agentkernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel"
)

// Issue 10: a tenant could define a class whose app_dir was the daemon's
// home and read admin.key and state.db at /app. Host directories are the
// operator's (agentkernel.toml): through the API, from any key, app_dir is
// a 400 naming the field and the way to ship code instead, and no class
// is created.
func TestObjectAppDirIsRefusedFromTheAPI(t *testing.T) {
	ctx := context.Background()
	d, admin := objectDaemon(t)
	tenant := tenantClient(t, d, admin, "mallory")
	for who, c := range map[string]*agentkernel.Client{"tenant": tenant, "admin": admin} {
		_, err := c.Objects.Define(ctx, agentkernel.ObjectClass{
			Class: "steal", InitCommand: []string{"/bin/cat", "/app/admin.key"}, AppDir: d.Config.Home,
		})
		if objStatus(err) != 400 || !strings.Contains(err.Error(), `"app_dir"`) || !strings.Contains(err.Error(), "bundle") {
			t.Fatalf("%s key, app_dir = the daemon's home: %v; want a 400 naming app_dir and bundles", who, err)
		}
		if _, err := c.Objects.Definition(ctx, "steal"); !agentkernel.IsNotFound(err) {
			t.Fatalf("%s key: the refused class exists: %v", who, err)
		}
		if _, err := c.Objects.Call(ctx, "steal", "x", agentkernel.ObjectCall{Method: "get"}); !agentkernel.IsNotFound(err) {
			t.Fatalf("%s key: a call on the refused class: %v", who, err)
		}
	}
}
