package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentkernel/agentkernel/internal/cluster"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Several daemons (issue 16). A request about something one node owns is
// served by that node: a durable object by the holder of its lease, a
// sandbox by the node whose driver runs it. Any other node forwards the
// request there (cluster.Node.Forward), with the caller's credentials;
// a forwarded request that finds its node no longer the owner is answered
// 503 with cluster.NotOwnerHeader, and the forwarding node looks again.

// NodeHeader names, on an answer about something a node owns, the node
// that served it.
const NodeHeader = cluster.NodeHeader

// clusterErr maps the cluster's errors to API errors.
func clusterErr(err error) (*Error, bool) {
	switch {
	case errors.Is(err, cluster.ErrNotActing), errors.Is(err, store.ErrFenced):
		return Errorf(http.StatusServiceUnavailable, TypeUnavailable, "%s; retry", err.Error()), true
	case errors.Is(err, cluster.ErrOwnerUnreachable):
		return Errorf(http.StatusBadGateway, TypeUnavailable, "%s; retry", err.Error()), true
	}
	return nil, false
}

// notOwner answers a forwarded request for something this node does not
// own (any more): the forwarding node looks the owner up again.
func (s *Server) notOwner(w http.ResponseWriter, r *http.Request, what string) {
	w.Header().Set(cluster.NotOwnerHeader, "1")
	w.Header().Set("Retry-After", "1")
	s.writeError(w, r, Errorf(http.StatusServiceUnavailable, TypeUnavailable, "%s moved to another node; retry", what))
}

// objectOwner serves h at the node that owns the request's object.
func (s *Server) objectOwner(h http.HandlerFunc) http.HandlerFunc {
	if s.cluster == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		k := objectKey(r)
		if k.ID == "" {
			h(w, r)
			return
		}
		res := store.ObjectResource(k)
		s.route(w, r, res, "object "+k.Class+"/"+k.ID, func(ctx context.Context) (cluster.Route, error) {
			return s.objects.Route(ctx, k)
		}, h)
	}
}

// route serves h here when find says this node owns res, and forwards
// the request to the owner otherwise.
func (s *Server) route(w http.ResponseWriter, r *http.Request, res, what string, find func(context.Context) (cluster.Route, error), h http.HandlerFunc) {
	rt, err := find(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rt.Local {
		w.Header().Set(NodeHeader, s.cluster.ID())
		h(w, r)
		return
	}
	if r.Header.Get(cluster.ForwardedHeader) != "" {
		s.cluster.Forget(res)
		s.notOwner(w, r, what)
		return
	}
	s.cluster.Forward(w, r, res, rt, func(w http.ResponseWriter, r *http.Request) {
		// The owner moved here meanwhile.
		if rt, err := find(r.Context()); err == nil && rt.Local {
			w.Header().Set(NodeHeader, s.cluster.ID())
			h(w, r)
			return
		} else if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.notOwner(w, r, what)
	}, s.writeError)
}

// sandboxNode serves h at the node that runs the request's sandbox.
func (s *Server) sandboxNode(h http.HandlerFunc) http.HandlerFunc {
	if s.cluster == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		res := "sandbox/" + id
		s.route(w, r, res, "sandbox "+id, func(ctx context.Context) (cluster.Route, error) {
			_, err := s.sandboxes.Get(ctx, PrincipalFrom(ctx).TenantID, id)
			var ee *sandbox.ElsewhereError
			if !errors.As(err, &ee) {
				// Here, or not found (the handler says so).
				return cluster.Route{Local: true}, nil
			}
			addr, err := s.cluster.Address(ctx, ee.Node)
			if errors.Is(err, store.ErrNotFound) {
				return cluster.Route{}, Errorf(http.StatusServiceUnavailable, TypeUnavailable, "sandbox %s runs on node %s, which is not in the cluster", id, ee.Node)
			}
			if err != nil {
				return cluster.Route{}, err
			}
			return cluster.Route{Node: ee.Node, Address: addr}, nil
		}, h)
	}
}

// SessionResource names a Managed Agents session's lease: its owner runs
// its turns and serves its routes (the live event stream among them).
func SessionResource(id string) string { return "session/" + id }

// sessionOwner serves h at the node that owns the request's session.
func (s *Server) sessionOwner(h http.HandlerFunc) http.HandlerFunc {
	if s.cluster == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		res := SessionResource(id)
		s.route(w, r, res, "session "+id, func(ctx context.Context) (cluster.Route, error) {
			if s.cluster.Owns(res) {
				return cluster.Route{Local: true}, nil
			}
			// Only a session of the caller's tenant gets a lease taken;
			// anything else is the handler's 404 here.
			ms, err := s.store.GetManagedSession(ctx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				// The store unreachable: not a 404, and not served here
				// as if this node owned the session.
				return cluster.Route{}, err
			}
			if err != nil || ms.TenantID != PrincipalFrom(ctx).TenantID {
				return cluster.Route{Local: true}, nil
			}
			return s.cluster.Route(ctx, res)
		}, h)
	}
}
