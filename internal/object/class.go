package object

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Storage modes.
const (
	ModeSnapshot     = "snapshot"
	ModeWriteThrough = "write-through"
)

// Isolation modes (the class field "isolation").
const (
	IsolationObject = config.IsolationObject
	IsolationClass  = config.IsolationClass
)

// DefaultIdleTimeout is the seed's idle_timeout default.
const DefaultIdleTimeout = 300 * time.Second

// Class is an object class with its defaults applied.
type Class struct {
	Name           string
	Image          string
	Driver         string
	IdleTimeout    time.Duration
	InitCommand    []string
	MaxConcurrency int
	StorageMode    string
	// AppDir is the host directory of an [[objects]] class, as configured
	// (resolved and checked at start and again at every mount).
	AppDir string
	Env    map[string]string
	// Isolation is IsolationObject (a sandbox per object) or
	// IsolationClass (the tenant's objects of the class share sandboxes,
	// ObjectsPerSandbox each at most; see shared.go).
	Isolation         string
	ObjectsPerSandbox int
	// FromConfig marks a class of agentkernel.toml (every tenant has it;
	// the API cannot change it).
	FromConfig bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ClassDef is a class as written in [[objects]] or in POST
// /v1/objects/definitions.
type ClassDef = config.ObjectClassConfig

var (
	classNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	// reservedClasses would be shadowed by fixed routes.
	reservedClasses = map[string]bool{"definitions": true}
)

// ValidateClass checks a definition, naming the first bad field.
func ValidateClass(d ClassDef) error {
	switch {
	case !classNameRE.MatchString(d.Class):
		return &FieldError{"class", fmt.Sprintf("%q is not a class name: 1-63 of a-z, 0-9, '-', '_', starting with a letter or digit", d.Class)}
	case reservedClasses[d.Class]:
		return &FieldError{"class", fmt.Sprintf("%q is reserved", d.Class)}
	case d.Driver != "" && d.Driver != "process" && d.Driver != "docker":
		return &FieldError{"driver", fmt.Sprintf("%q: accepted \"process\" or \"docker\"", d.Driver)}
	case d.StorageMode != "" && d.StorageMode != ModeSnapshot && d.StorageMode != ModeWriteThrough:
		return &FieldError{"storage_mode", fmt.Sprintf("%q: accepted %q or %q", d.StorageMode, ModeSnapshot, ModeWriteThrough)}
	case d.IdleTimeoutSeconds < 0:
		return &FieldError{"idle_timeout_seconds", "must be 0 (default 300) or more"}
	case d.MaxConcurrency < 0 || d.MaxConcurrency > 1024:
		return &FieldError{"max_concurrency", "must be 0 (default 1) to 1024"}
	case len(d.InitCommand) == 0 || d.InitCommand[0] == "":
		return &FieldError{"init_command", `required: the command that starts the object's server on 127.0.0.1:9333, e.g. ["node", "/app/counter.js"]`}
	case d.Isolation != "" && d.Isolation != IsolationObject && d.Isolation != IsolationClass:
		return &FieldError{"isolation", fmt.Sprintf("%q: accepted %q (default: a sandbox per object) or %q (the tenant's objects of the class share sandboxes)", d.Isolation, IsolationObject, IsolationClass)}
	case d.ObjectsPerSandbox < 0 || d.ObjectsPerSandbox > config.MaxObjectsPerSandbox:
		return &FieldError{"objects_per_sandbox", fmt.Sprintf("must be 0 (default %d) to %d", config.DefaultObjectsPerSandbox, config.MaxObjectsPerSandbox)}
	case d.ObjectsPerSandbox > 0 && d.Isolation != IsolationClass:
		return &FieldError{"objects_per_sandbox", `only a class with isolation "class" shares sandboxes; set "isolation": "class" or leave objects_per_sandbox out`}
	case d.AppDir != "" && !filepath.IsAbs(d.AppDir):
		return &FieldError{"app_dir", fmt.Sprintf("%q is not an absolute host directory", d.AppDir)}
	}
	return nil
}

func classFromDef(d ClassDef, fromConfig bool) *Class {
	c := &Class{
		Name: d.Class, Image: d.Image, Driver: d.Driver, InitCommand: append([]string(nil), d.InitCommand...),
		MaxConcurrency: int(d.MaxConcurrency), StorageMode: d.StorageMode, AppDir: d.AppDir, Env: d.Env, FromConfig: fromConfig,
		IdleTimeout: time.Duration(d.IdleTimeoutSeconds) * time.Second,
		Isolation:   d.Isolation, ObjectsPerSandbox: int(d.ObjectsPerSandbox),
	}
	if c.Isolation == "" {
		c.Isolation = IsolationObject
	}
	if c.ObjectsPerSandbox == 0 && c.Isolation == IsolationClass {
		c.ObjectsPerSandbox = config.DefaultObjectsPerSandbox
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = 1
	}
	if c.StorageMode == "" {
		c.StorageMode = ModeSnapshot
	}
	return c
}

func classFromStore(sc *store.ObjectClass) *Class {
	c := classFromDef(ClassDef{
		Class: sc.Class, Image: sc.Image, Driver: sc.Driver, IdleTimeoutSeconds: sc.IdleTimeoutSeconds,
		InitCommand: sc.InitCommand, MaxConcurrency: sc.MaxConcurrency, StorageMode: sc.StorageMode,
		AppDir: sc.AppDir, Env: sc.Env, Isolation: sc.Isolation, ObjectsPerSandbox: sc.ObjectsPerSandbox,
	}, false)
	c.CreatedAt, c.UpdatedAt = sc.CreatedAt, sc.UpdatedAt
	return c
}

// Def returns the class as a definition (for the API).
func (c *Class) Def() ClassDef {
	return ClassDef{
		Class: c.Name, Image: c.Image, Driver: c.Driver, IdleTimeoutSeconds: int64(c.IdleTimeout / time.Second),
		InitCommand: c.InitCommand, MaxConcurrency: int64(c.MaxConcurrency), StorageMode: c.StorageMode,
		AppDir: c.AppDir, Env: c.Env, Isolation: c.Isolation, ObjectsPerSandbox: int64(c.ObjectsPerSandbox),
	}
}

type classKey struct{ tenant, class string }

// Class resolves a tenant's class: agentkernel.toml first, then the
// tenant's definitions (cached; this node is the only writer).
func (r *Runtime) Class(ctx context.Context, tenantID, name string) (*Class, error) {
	if c, ok := r.configClasses[name]; ok {
		return c, nil
	}
	r.classMu.RLock()
	c, ok := r.classCache[classKey{tenantID, name}]
	r.classMu.RUnlock()
	if ok {
		return c, nil
	}
	sc, err := r.st.GetObjectClass(ctx, tenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w %q: declare it in agentkernel.toml [[objects]] or POST /v1/objects/definitions", ErrUnknownClass, name)
	}
	if err != nil {
		return nil, err
	}
	c = classFromStore(sc)
	r.classMu.Lock()
	r.classCache[classKey{tenantID, name}] = c
	r.classMu.Unlock()
	return c, nil
}

// loadConfigClasses validates the [[objects]] classes and resolves their
// app_dir against the allowed roots: the daemon does not start with one
// that breaks the rules.
func (r *Runtime) loadConfigClasses(defs []ClassDef) error {
	for i, d := range defs {
		if err := ValidateClass(d); err != nil {
			return fmt.Errorf("objects[%d]: %w", i, err)
		}
		c := classFromDef(d, true)
		if d.AppDir != "" {
			if r.appRoots == nil {
				roots, err := newAppRoots(r.lim.AppRoots, r.cfg.PrivatePaths)
				if err != nil {
					return err
				}
				r.appRoots = roots
			}
			if _, err := r.appRoots.resolve(fmt.Sprintf("objects[%d].app_dir", i), d.AppDir); err != nil {
				return err
			}
		}
		r.configClasses[d.Class] = c
	}
	return nil
}

// errAppDirFromAPI refuses a host path from an API key, admin or not: an
// API key is a network credential, and which host directories objects may
// see is decided by whoever runs the daemon, in agentkernel.toml.
func errAppDirFromAPI(class string) error {
	return &FieldError{"app_dir", fmt.Sprintf("a host directory cannot be set through the API; upload the app as a bundle instead: "+
		"PUT /v1/objects/definitions/%s/bundle with a tar or tar.gz of it (agentkernel object bundle push %s DIR). "+
		"Host directories are set by the operator in agentkernel.toml [[objects]], under [durable_objects] app_roots", class, class)}
}

// DefineClass creates or replaces a tenant's class. Objects already running
// keep their sandbox until they hibernate; the class's bundle stays.
func (r *Runtime) DefineClass(ctx context.Context, tenantID string, d ClassDef) (*Class, error) {
	if d.AppDir != "" {
		return nil, errAppDirFromAPI(d.Class)
	}
	if err := ValidateClass(d); err != nil {
		return nil, err
	}
	if _, ok := r.configClasses[d.Class]; ok {
		return nil, fmt.Errorf("%w: class %q is declared in agentkernel.toml; change it there", ErrClassConflict, d.Class)
	}
	sc, err := r.st.PutObjectClass(ctx, &store.ObjectClass{
		TenantID: tenantID, Class: d.Class, Image: d.Image, Driver: d.Driver, IdleTimeoutSeconds: d.IdleTimeoutSeconds,
		InitCommand: d.InitCommand, MaxConcurrency: d.MaxConcurrency, StorageMode: d.StorageMode, AppDir: d.AppDir, Env: d.Env,
		Isolation: d.Isolation, ObjectsPerSandbox: d.ObjectsPerSandbox,
	})
	if err != nil {
		return nil, err
	}
	c := classFromStore(sc)
	r.classMu.Lock()
	r.classCache[classKey{tenantID, d.Class}] = c
	r.classMu.Unlock()
	return c, nil
}

// Classes lists the classes a tenant can use, by name.
func (r *Runtime) Classes(ctx context.Context, tenantID string) ([]*Class, error) {
	scs, err := r.st.ListObjectClasses(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	out := make([]*Class, 0, len(scs)+len(r.configClasses))
	for _, c := range r.configClasses {
		out = append(out, c)
	}
	for _, sc := range scs {
		if _, ok := r.configClasses[sc.Class]; !ok {
			out = append(out, classFromStore(sc))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteClass removes a tenant's class and its bundle. Its objects stay
// (and can be read and deleted) but cannot be called until the class is
// defined again; running ones keep the bundle they mounted until they
// hibernate.
func (r *Runtime) DeleteClass(ctx context.Context, tenantID, name string) error {
	if _, ok := r.configClasses[name]; ok {
		return fmt.Errorf("%w: class %q is declared in agentkernel.toml; remove it there", ErrClassConflict, name)
	}
	r.classMu.Lock()
	delete(r.classCache, classKey{tenantID, name})
	r.classMu.Unlock()
	err := r.st.DeleteObjectClass(ctx, tenantID, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w %q", ErrUnknownClass, name)
	}
	if err != nil {
		return err
	}
	if r.bundles != nil {
		// The class's row took its bundle row with it.
		r.bundles.forget(ctx, tenantID)
	}
	return nil
}
