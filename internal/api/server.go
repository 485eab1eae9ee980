// Package api is agentkernel's HTTP surface: REST + SSE on the standard
// library's ServeMux, API keys and tenants, the JSON error envelope, request
// ids, body limits, /healthz and /metrics.
package api

import (
	"github.com/agentkernel/agentkernel/internal/cluster"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentkernel/agentkernel/internal/files"
	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/webhook"
)

// Options configure a Server.
type Options struct {
	Store store.Store
	Log   *slog.Logger
	// Registry receives the HTTP metrics and is served on /metrics.
	Registry *prometheus.Registry
	// MaxBodyBytes limits request bodies (413 beyond).
	MaxBodyBytes int64
	Version      string
	// Sandboxes serves /v1/sandboxes when set.
	Sandboxes *sandbox.Manager
	// MaxFileBytes limits file uploads and downloads (default 64 MiB).
	MaxFileBytes int64
	// Objects serves /v1/objects and /v1/audit when set.
	Objects *object.Runtime
	// Managed serves the Managed Agents API (agents, environments,
	// sessions, session events) when set.
	Managed *ManagedOptions
	// Monitor serves tickets, tasks, agent events and activity when set.
	Monitor *monitor.Service
	// Files serves /v1/files when set.
	Files *files.Service
	// Webhooks serves /v1/webhooks when set.
	Webhooks *webhook.Service
	// Cluster is this node when several daemons share the store (nil
	// alone): requests about what another node owns are forwarded to it.
	Cluster *cluster.Node
}

// Server holds the routes and their dependencies.
type Server struct {
	store   store.Store
	log     *slog.Logger
	maxBody int64
	// skillUploads is skills.max_upload_bytes when /v1/skills is served.
	skillUploads int64
	version      string
	metrics      *httpMetrics
	// sandboxes is nil when the daemon runs without a sandbox layer.
	sandboxes *sandbox.Manager
	maxFile   int64
	keys      keyCache
	objects   *object.Runtime
	files     *files.Service
	cluster   *cluster.Node
	mux       *routeMux
	handler   http.Handler
	// managedSvc is the Managed Agents domain (nil without it); the
	// daemon runs the deployment scheduler over it.
	managedSvc *managed.Service
}

// ManagedService is the Managed Agents domain the API serves (nil when
// the API serves none).
func (s *Server) ManagedService() *managed.Service { return s.managedSvc }

// routeMux is the ServeMux, keeping the patterns it serves and giving
// every route that takes no body (see requestBodies) a handler that
// refuses one.
type routeMux struct {
	*http.ServeMux
	s        *Server
	patterns []string
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	method, _, _ := strings.Cut(pattern, " ")
	if method != http.MethodGet && method != http.MethodHead && strings.HasPrefix(pattern, method+" ") && !takesBody(pattern) {
		h = m.s.noBody(pattern, h)
	}
	m.ServeMux.HandleFunc(pattern, h)
}

func (m *routeMux) Handle(pattern string, h http.Handler) { m.HandleFunc(pattern, h.ServeHTTP) }

// canonical refuses, for every method but GET and HEAD, a path that
// ServeMux would answer with a redirect to its cleaned form ("//", "/./",
// "/../"): a client that follows the redirect sends its body to another
// resource (PUT …/files//tmp/x would write /workspace/tmp/x).
func (s *Server) canonical(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodConnect {
			p := r.URL.EscapedPath()
			clean := path.Clean("/" + p)
			if strings.HasSuffix(p, "/") && clean != "/" {
				clean += "/"
			}
			if clean != p {
				s.writeError(w, r, BadRequest("request path %q has empty, \".\" or \"..\" segments (it would be %q); a slash that belongs to a file path is sent URL-encoded, as %%2F", p, clean))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Patterns returns the route patterns the server serves.
func (s *Server) Patterns() []string { return append([]string(nil), s.mux.patterns...) }

// New builds the server and its routes.
func New(o Options) *Server {
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 2 << 20
	}
	s := &Server{
		store:   o.Store,
		log:     o.Log,
		maxBody: o.MaxBodyBytes,
		version: o.Version,
		metrics: newHTTPMetrics(o.Registry),

		sandboxes: o.Sandboxes,
		maxFile:   o.MaxFileBytes,
		objects:   o.Objects,
		files:     o.Files,
		cluster:   o.Cluster,
	}
	if s.maxFile <= 0 {
		s.maxFile = 64 << 20
	}
	s.mux = &routeMux{ServeMux: http.NewServeMux(), s: s}
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{Registry: o.Registry}))

	s.mux.HandleFunc("POST /v1/tenants", s.adminOnly(s.createTenant))
	s.mux.HandleFunc("GET /v1/tenants", s.adminOnly(s.noQuery(s.listTenants)))
	s.mux.HandleFunc("GET /v1/tenants/{id}", s.adminOnly(s.noQuery(s.getTenant)))

	s.mux.HandleFunc("POST /v1/keys", s.authenticated(s.createKey))
	s.mux.HandleFunc("GET /v1/keys", s.authenticated(s.query(s.listKeys, "tenant_id")))
	s.mux.HandleFunc("GET /v1/keys/{id}", s.authenticated(s.noQuery(s.getKey)))
	s.mux.HandleFunc("DELETE /v1/keys/{id}", s.authenticated(s.revokeKey))

	if s.sandboxes != nil {
		s.registerSandboxRoutes()
	}
	if o.Managed != nil {
		s.registerManagedRoutes(o.Managed)
	}
	if s.objects != nil {
		s.registerObjectRoutes()
	}
	if o.Monitor != nil {
		s.registerMonitorRoutes(o.Monitor)
	}
	if s.files != nil {
		s.registerFileRoutes(s.files)
	}
	if o.Webhooks != nil {
		s.registerWebhookRoutes(o.Webhooks)
	}

	s.mux.HandleFunc("/", s.notFound)
	s.handler = s.instrument(s.canonical(s.mux))
	return s
}

// Handle registers a route; capabilities added later use it.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, Errorf(http.StatusNotFound, TypeNotFound, "no route for %s %s", r.Method, r.URL.Path))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	status, code := "ok", http.StatusOK
	if err := s.store.Ping(r.Context()); err != nil {
		s.log.WarnContext(r.Context(), "health: store ping failed", "err", err)
		status, code = "degraded", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]string{"status": status, "version": s.version, "store": s.store.Engine()})
}
