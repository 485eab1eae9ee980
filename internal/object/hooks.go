package object

import (
	"context"
	"strings"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// MetadataKey marks an object's sandbox with "class/id".
const MetadataKey = "agentkernel.object"

// objectOf returns the object a sandbox belongs to, if any.
func objectOf(sb *store.Sandbox) (store.ObjectKey, bool) {
	v := sb.Metadata[MetadataKey]
	class, id, ok := strings.Cut(v, "/")
	if !ok {
		return store.ObjectKey{}, false
	}
	return store.ObjectKey{TenantID: sb.TenantID, Class: class, ID: id}, true
}

// hooks put object sandboxes through the seed's wake steps: the class's
// app_dir at /app (mount resources), then the server started, healthy and
// holding the persisted storage (set contexts) before the sandbox counts
// as warm. A sandbox recycled under a running object is therefore rebuilt
// the same way, from the last persisted storage.
func (r *Runtime) hooks() sandbox.Hooks {
	return sandbox.Hooks{
		Mounts: func(sb *store.Sandbox) []sandbox.Mount {
			key, ok := objectOf(sb)
			if !ok {
				return nil
			}
			cls, err := r.Class(context.Background(), key.TenantID, key.Class)
			if err != nil || cls.AppDir == "" {
				return nil
			}
			return []sandbox.Mount{{Source: cls.AppDir, Target: sandbox.AppPath, ReadOnly: true}}
		},
		AfterWarm: func(ctx context.Context, sb *store.Sandbox, c *guest.Client) error {
			key, ok := objectOf(sb)
			if !ok {
				return nil
			}
			cls, err := r.Class(ctx, key.TenantID, key.Class)
			if err != nil {
				return err
			}
			if err := r.startServer(ctx, c, cls, key, sb.TenantID); err != nil {
				return err
			}
			if a := r.lookupActor(key); a != nil {
				a.warms.Add(1)
			}
			return nil
		},
	}
}
