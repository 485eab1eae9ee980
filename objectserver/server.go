// Package objectserver helps write the in-sandbox server of an agentkernel
// durable object: register methods by name, read and write the object's
// storage, and serve the daemon's protocol on 127.0.0.1:9333.
//
//	s := objectserver.New()
//	s.Method("increment", func(c *objectserver.Call) (any, error) {
//		var n int
//		if _, err := c.Storage().Get("count", &n); err != nil {
//			return nil, err
//		}
//		n++
//		return map[string]int{"value": n}, c.Storage().Put("count", n)
//	})
//	log.Fatal(s.ListenAndServe())
//
// The package uses only the standard library, so `agentkernel object init`
// can copy it into a project that builds offline.
package objectserver

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// HandlerFunc runs one method. Its result is encoded as JSON; a non-nil error
// fails the call (see Error for choosing the status).
type HandlerFunc func(c *Call) (any, error)

// Server dispatches the daemon's calls to registered methods. It is an
// http.Handler; ListenAndServe serves it where the daemon expects it.
//
// A Server keeps storage per object (X-Agentkernel-Object-Id), so one
// process can serve many objects of a class with isolation "class"; the
// same handlers work unchanged with isolation "object", where the daemon
// gives it one object.
type Server struct {
	mu      sync.RWMutex
	methods map[string]HandlerFunc
	stores  *stores
}

// New returns a Server with no methods and empty storage.
func New() *Server {
	return &Server{methods: map[string]HandlerFunc{}, stores: newStores()}
}

// Method registers h under name. It panics on an empty name, a name with a
// '/', a name starting with "__" (reserved for the protocol), a nil h or a
// name registered twice: all are programming errors, like http.ServeMux's.
func (s *Server) Method(name string, h HandlerFunc) {
	switch {
	case name == "" || strings.Contains(name, "/"):
		panic(fmt.Sprintf("objectserver: invalid method name %q", name))
	case strings.HasPrefix(name, "__"):
		panic(fmt.Sprintf("objectserver: method name %q: names starting with \"__\" are reserved", name))
	case h == nil:
		panic(fmt.Sprintf("objectserver: method %q: nil handler", name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.methods[name]; dup {
		panic(fmt.Sprintf("objectserver: method %q registered twice", name))
	}
	s.methods[name] = h
}

func (s *Server) handler(name string) (HandlerFunc, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.methods[name]
	return h, ok
}

// Addr is the address the daemon calls: 127.0.0.1 on $AGENTKERNEL_OBJECT_PORT,
// default 9333.
func Addr() string {
	port := os.Getenv(PortEnv)
	if port == "" {
		port = DefaultPort
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// ListenAndServe serves on Addr() until the listener fails.
func (s *Server) ListenAndServe() error {
	l, err := net.Listen("tcp", Addr())
	if err != nil {
		return fmt.Errorf("objectserver: %w", err)
	}
	return s.Serve(l)
}

// Serve serves on l until it fails.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	return hs.Serve(l)
}
