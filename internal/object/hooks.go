package object

import (
	"context"
	"errors"
	"fmt"
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
// app at /app (mount resources), then the server started, healthy and
// holding the persisted storage (set contexts) before the sandbox counts
// as warm. A sandbox recycled under a running object is therefore rebuilt
// the same way, from the last persisted storage.
func (r *Runtime) hooks() sandbox.Hooks {
	return sandbox.Hooks{
		Mounts: func(sb *store.Sandbox) []sandbox.Mount {
			key, ok := objectOf(sb)
			if sk, _, shared := sharedMeta(sb); shared {
				key, ok = store.ObjectKey{TenantID: sk.tenant, Class: sk.class}, true
			}
			if !ok {
				return nil
			}
			src, err := r.appSource(context.Background(), key, sb.ID)
			// Mounts cannot fail a start; AfterWarm reports the error.
			r.appMounts.Store(sb.ID, appMount{src: src, err: err})
			if err != nil || src == "" {
				return nil
			}
			return []sandbox.Mount{{Source: src, Target: sandbox.AppPath, ReadOnly: true}}
		},
		AfterWarm: func(ctx context.Context, sb *store.Sandbox, c *guest.Client) error {
			if sk, _, shared := sharedMeta(sb); shared {
				return r.warmShared(ctx, sb, c, store.ObjectKey{TenantID: sk.tenant, Class: sk.class})
			}
			key, ok := objectOf(sb)
			if !ok {
				return nil
			}
			cls, err := r.Class(ctx, key.TenantID, key.Class)
			if err != nil {
				return err
			}
			app, err := r.hasApp(ctx, cls, key, sb.ID)
			if err != nil {
				return err
			}
			if err := r.startServer(ctx, c, cls, key, sb.TenantID, app, false); err != nil {
				return err
			}
			if a := r.lookupActor(key); a != nil {
				a.warms.Add(1)
			}
			return nil
		},
	}
}

// warmShared starts the server of a shared sandbox, holding no object
// yet: every member's storage is injected again (a new epoch).
func (r *Runtime) warmShared(ctx context.Context, sb *store.Sandbox, c *guest.Client, key store.ObjectKey) error {
	cls, err := r.Class(ctx, key.TenantID, key.Class)
	if err != nil {
		return err
	}
	app, err := r.hasApp(ctx, cls, key, sb.ID)
	if err != nil {
		return err
	}
	if err := r.startServer(ctx, c, cls, key, sb.TenantID, app, true); err != nil {
		return err
	}
	if sh := r.sharedByID(sb.ID); sh != nil {
		sh.epoch.Add(1)
	}
	return nil
}

// appMount is what a sandbox's /app came from when it started.
type appMount struct {
	src string
	err error
}

// appSource is the host directory an object's sandbox mounts at /app: an
// [[objects]] class's app_dir, checked again against the roots (the
// operator may have replaced it with a link since the daemon started), or
// the tenant's bundle for its class, unpacked. "" means no /app.
func (r *Runtime) appSource(ctx context.Context, key store.ObjectKey, sandboxID string) (string, error) {
	cls, err := r.Class(ctx, key.TenantID, key.Class)
	if err != nil {
		return "", err
	}
	switch {
	case cls.FromConfig && cls.AppDir != "":
		return r.appRoots.resolve("app_dir of class "+cls.Name, cls.AppDir)
	case cls.FromConfig:
		return "", nil
	case cls.AppDir != "":
		// Defined before host paths became the operator's alone.
		return "", &FieldError{"app_dir", fmt.Sprintf("class %q was defined through the API with a host app_dir, which only agentkernel.toml may name; "+
			"define it again without app_dir and upload the app as a bundle (PUT /v1/objects/definitions/%s/bundle)", cls.Name, cls.Name)}
	case r.bundles == nil:
		return "", nil
	}
	src, err := r.bundles.mount(ctx, key.TenantID, key.Class, sandboxID)
	if err != nil {
		return "", fmt.Errorf("unpack the bundle of class %q: %w", key.Class, err)
	}
	return src, nil
}

// hasApp reports whether the sandbox has the class's app at /app, or why
// it could not get it.
func (r *Runtime) hasApp(ctx context.Context, cls *Class, key store.ObjectKey, sandboxID string) (bool, error) {
	if v, ok := r.appMounts.Load(sandboxID); ok {
		m := v.(appMount)
		return m.src != "", m.err
	}
	// Started by an earlier run of the daemon: it mounted what the class
	// had then.
	if cls.AppDir != "" {
		return cls.FromConfig, nil
	}
	if r.bundles == nil {
		return false, nil
	}
	in, err := r.bundles.info(ctx, key.TenantID, key.Class)
	return in != nil, err
}

// releaseApp forgets a sandbox's /app once it stopped or is gone, so the
// bundle tree it held can be collected.
func (r *Runtime) releaseApp(ctx context.Context, tenantID, sandboxID string) {
	r.appMounts.Delete(sandboxID)
	if r.bundles != nil {
		r.bundles.release(ctx, tenantID, sandboxID)
	}
}

// tidyBundles, at start, drops the refs of sandboxes that stopped while
// the daemon was down and everything an earlier run left half-done.
func (r *Runtime) tidyBundles(ctx context.Context) {
	if r.bundles == nil {
		return
	}
	r.bundles.clearTmp()
	for tenant, ids := range r.bundles.refs() {
		for _, id := range ids {
			in, err := r.sbx.Get(ctx, tenant, id)
			if err == nil && in.State != sandbox.StateCold && in.State != sandbox.StateDestroyed {
				continue
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				continue
			}
			r.bundles.release(ctx, tenant, id)
		}
	}
	r.bundles.collectAll(ctx)
}
