package guest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Config configures the guest server.
type Config struct {
	// Listener, if set, is the daemon's socket, already listening: the
	// process driver creates it on the host, out of the sandbox's reach,
	// and passes it down (--listen-fd).
	Listener net.Listener
	// SocketPath is where the guest listens for the daemon when Listener
	// is nil (the docker driver's bind-mounted directory).
	SocketPath string
	// Secret is the sandbox's secret (SecretSize bytes): every connection
	// on the daemon's socket must prove it (handshake.go). Required.
	Secret []byte
	// AgentSocketPath is the agent socket inside the sandbox: it takes
	// agent events (POST /agent-events) from the sandbox's own processes
	// and nothing else, with no secret. Required; DefaultConfig has
	// DefaultAgentSocketPath.
	AgentSocketPath string
	// RuntimeDir holds what must outlive the guest and the sandbox's
	// hibernation: op records (ops/) and unpulled agent events
	// (agent-events/). The daemon backs it up with the workspace, but it
	// is not in the workspace. Empty means WorkDir/.agentkernel, as earlier
	// versions kept them; otherwise, records an earlier version left there
	// are moved here when the guest starts.
	RuntimeDir string
	// StateDir holds background process output (default /.agentkernel/state).
	StateDir string
	// WorkDir is the default cwd and the base of relative paths
	// (default /workspace).
	WorkDir string
	// ProxyTarget is where /proxy/… goes (default http://127.0.0.1:9333).
	ProxyTarget string
	// EgressListen and EgressSocket, when set, run the egress forwarder:
	// connections to EgressListen (the sandbox's loopback) go to the
	// daemon's proxy at EgressSocket.
	EgressListen string
	EgressSocket string
	// EgressCA and CABundle, when set, compose CABundle at start: the
	// sandbox's system bundle with the proxy's CA (EgressCA) appended.
	EgressCA string
	CABundle string
	// ReapAll makes the guest reap every child, as PID 1 must. Main sets it
	// when the guest is PID 1.
	ReapAll bool
	// Env is the base environment of children (default os.Environ()).
	Env []string
	// PoolPipe, if set, is the read end of a pipe whose write end the
	// daemon holds while this sandbox waits, unassigned, in its warm pool
	// (--pool-fd): when it closes before POST /assign, the guest ends.
	PoolPipe *os.File
	// ChildRlimitAS, if not 0, is RLIMIT_AS in bytes for every command
	// (the process driver's fallback when cgroups are not available).
	ChildRlimitAS uint64
	// SelfArgv is how to invoke the guest again up to its flags (e.g.
	// ["/.agentkernel/guest", "guest"]); Main sets it. Needed only with
	// ChildRlimitAS.
	SelfArgv []string
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultAgentSocketPath is where agents inside a sandbox post events.
const DefaultAgentSocketPath = "/run/agentkernel/agent.sock"

// DefaultConfig is the configuration inside a sandbox.
func DefaultConfig() Config {
	return Config{
		AgentSocketPath: DefaultAgentSocketPath,
		StateDir:        "/.agentkernel/state",
		WorkDir:         "/workspace",
		ProxyTarget:     "http://127.0.0.1:9333",
	}
}

// Server is the guest's HTTP server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	self    string // the guest's own executable, for ChildRlimitAS
	started time.Time
	reaper  *reaper
	procs   *processTable
	ops     *opTable
	handler http.Handler
	// agentHandler serves the agent socket.
	agentHandler http.Handler

	// envMu guards cfg.Env, which an assignment (POST /assign) extends,
	// and assigned.
	envMu    sync.RWMutex
	assigned bool

	// execs tracks running exec'd commands so shutdown can kill them.
	execMu sync.Mutex
	execs  map[int]struct{}
}

// NewServer validates cfg and fills defaults.
func NewServer(cfg Config) (*Server, error) {
	def := DefaultConfig()
	if cfg.Listener == nil && cfg.SocketPath == "" {
		return nil, errors.New("guest: no daemon socket: set Listener or SocketPath")
	}
	if len(cfg.Secret) != SecretSize {
		return nil, fmt.Errorf("guest: the sandbox's secret is %d bytes, want %d", len(cfg.Secret), SecretSize)
	}
	if cfg.AgentSocketPath == "" {
		return nil, errors.New("guest: no agent socket: set AgentSocketPath")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = def.StateDir
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = def.WorkDir
	}
	// The files API compares paths against it (fsys.go).
	cfg.WorkDir = filepath.Clean(cfg.WorkDir)
	legacyRuntime := filepath.Join(cfg.WorkDir, runtimeDirName)
	if cfg.RuntimeDir == "" {
		cfg.RuntimeDir = legacyRuntime
	}
	cfg.RuntimeDir = filepath.Clean(cfg.RuntimeDir)
	if cfg.ProxyTarget == "" {
		cfg.ProxyTarget = def.ProxyTarget
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		reaper: newReaper(cfg.ReapAll),
		execs:  map[int]struct{}{},
	}
	if cfg.ChildRlimitAS > 0 {
		self, err := os.Executable()
		if err != nil || len(cfg.SelfArgv) == 0 {
			return nil, fmt.Errorf("guest: ChildRlimitAS needs SelfArgv and os.Executable: %v", err)
		}
		s.self = self
	}
	s.procs = newProcessTable(s)
	s.ops = newOpTable(cfg.RuntimeDir, cfg.Now, cfg.Logger)
	h, err := s.routes()
	if err != nil {
		return nil, err
	}
	s.handler = h
	return s, nil
}

// Serve serves the daemon's socket and the agent socket until ctx is
// done, then shuts down: running commands' process groups are killed and
// the sockets it created are removed.
func (s *Server) Serve(ctx context.Context) error {
	if s.cfg.PoolPipe != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go s.watchPool(cancel)
	}
	if err := os.MkdirAll(s.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("guest: state dir: %w", err)
	}
	if legacy := filepath.Join(s.cfg.WorkDir, runtimeDirName); s.cfg.RuntimeDir != legacy {
		if err := migrateRuntime(legacy, s.cfg.RuntimeDir); err != nil {
			// The records stay where they were; op recovery then reports
			// such an op as unknown, which is why this fails the start.
			return fmt.Errorf("guest: move the runtime's records out of the workspace: %w", err)
		}
	}
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = listenUnix(s.cfg.SocketPath); err != nil {
			return err
		}
		defer os.Remove(s.cfg.SocketPath)
	}
	agentLn, err := listenUnix(s.cfg.AgentSocketPath)
	if err != nil {
		ln.Close()
		return err
	}
	defer os.Remove(s.cfg.AgentSocketPath)
	if s.cfg.EgressCA != "" && s.cfg.CABundle != "" {
		if err := composeCABundle(s.cfg.EgressCA, s.cfg.CABundle); err != nil {
			s.log.Warn("guest: the proxy's CA is not in the trust store; TLS to intercepted hosts will fail", "err", err)
		}
	}
	if s.cfg.EgressListen != "" && s.cfg.EgressSocket != "" {
		fwd, err := startEgress(s.cfg.EgressListen, s.cfg.EgressSocket, s.log)
		if err != nil {
			ln.Close()
			agentLn.Close()
			return err
		}
		defer fwd.Close()
	}
	var refusals refusalLog
	daemonLn := &authListener{Listener: ln, secret: s.cfg.Secret, onFail: func(err error) {
		if n, ok := refusals.note(s.cfg.Now()); ok {
			s.log.Warn("guest: refused a connection on the daemon's socket", "err", err, "refused_since_last_report", n)
		}
	}}
	s.started = s.cfg.Now()
	s.reaper.start()
	defer s.reaper.close()

	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	agentSrv := &http.Server{Handler: s.agentHandler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(daemonLn) }()
	go func() { errc <- agentSrv.Serve(agentLn) }()
	s.log.Info("guest listening", "socket", ln.Addr().String(), "agent_socket", s.cfg.AgentSocketPath, "pid", os.Getpid(), "reap_all", s.cfg.ReapAll)

	select {
	case <-ctx.Done():
	case err = <-errc:
		srv.Close()
		agentSrv.Close()
		<-errc
		return fmt.Errorf("guest: serve: %w", err)
	}
	s.log.Info("guest shutting down")
	s.killAll()
	shCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = agentSrv.Shutdown(shCtx)
	_ = srv.Shutdown(shCtx)
	s.procs.wait()
	s.ops.wait()
	for range 2 {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// listenUnix listens on path, replacing a socket left by an earlier guest.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("guest: socket dir: %w", err)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("guest: listen: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // Serve removes it, after shutdown
	return ln, nil
}

// killAll kills every process group the guest started.
func (s *Server) killAll() {
	s.execMu.Lock()
	for pid := range s.execs {
		killGroup(pid, sigKill)
	}
	s.execMu.Unlock()
	s.procs.killAll()
}

func (s *Server) trackExec(pid int, running bool) {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	if running {
		s.execs[pid] = struct{}{}
	} else {
		delete(s.execs, pid)
	}
}

// resolve makes p absolute against the work dir.
func (s *Server) resolve(p string) string {
	if p == "" {
		return s.cfg.WorkDir
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(s.cfg.WorkDir, p)
}

func (s *Server) routes() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("POST /assign", s.handleAssign)
	mux.HandleFunc("POST /exec", s.handleExec)
	mux.HandleFunc("GET /ops/{op_id}", s.handleGetOp)
	mux.HandleFunc("POST /processes", s.handleStartProcess)
	mux.HandleFunc("GET /processes", s.handleListProcesses)
	mux.HandleFunc("GET /processes/{id}", s.handleGetProcess)
	mux.HandleFunc("GET /processes/{id}/output", s.handleProcessOutput)
	mux.HandleFunc("POST /processes/{id}/kill", s.handleKillProcess)
	mux.HandleFunc("GET /files/content", s.handleReadFile)
	mux.HandleFunc("PUT /files/content", s.handleWriteFile)
	mux.HandleFunc("GET /files/list", s.handleListDir)
	mux.HandleFunc("GET /files/stat", s.handleStat)
	mux.HandleFunc("POST /files/mkdir", s.handleMkdir)
	mux.HandleFunc("POST /files/remove", s.handleRemove)
	tools := newToolHandler(s)
	mux.Handle("POST /tools/{name}", tools)
	mux.HandleFunc("DELETE /tools/ops/{op_id}", tools.cancelOp)
	events := newAgentEventHandler(s)
	mux.Handle("/agent-events", events)
	// The agent socket: what an agent may post, nothing more.
	agent := http.NewServeMux()
	agent.HandleFunc("POST /agent-events", events.post)
	s.agentHandler = agent
	proxy, err := s.proxy()
	if err != nil {
		return nil, err
	}
	mux.Handle("/proxy/", proxy)
	mux.HandleFunc("POST "+objectConnPath, s.handleObjectConn)
	return mux, nil
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Health{
		OK:       true,
		PID:      os.Getpid(),
		UptimeMS: s.cfg.Now().Sub(s.started).Milliseconds(),
	})
}

// refusalLog reports refused connections at most once a minute: where the
// sandbox can reach the daemon's socket (docker), it must not be able to
// fill the host's container log by knocking.
type refusalLog struct {
	mu    sync.Mutex
	last  time.Time
	count int
}

func (r *refusalLog) note(now time.Time) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	if !r.last.IsZero() && now.Sub(r.last) < time.Minute {
		return 0, false
	}
	n := r.count
	r.last, r.count = now, 0
	return n, true
}
