package managed

import (
	"context"
	"errors"

	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/store"
)

// ParseResourceSpec reads one resource as the SDK sends it.
func ParseResourceSpec(o Obj) (resources.Spec, error) {
	var sp resources.Spec
	var err error
	if sp.Type, err = o.ReqStr("type"); err != nil {
		return sp, err
	}
	str := func(k string, dst *string) {
		if err == nil {
			*dst, err = o.Str(k)
		}
	}
	if o.Set("mount_path") {
		str("mount_path", &sp.MountPath)
		if err == nil && sp.MountPath == "" {
			err = badRequest("field %q must not be empty; leave it out for the default", o.Field("mount_path"))
		}
	}
	switch sp.Type {
	case resources.KindFile:
		str("file_id", &sp.FileID)
	case resources.KindGitHub:
		str("url", &sp.URL)
		str("authorization_token", &sp.Token)
		var co Obj
		var ok bool
		if err == nil {
			co, ok, err = o.Object("checkout")
		}
		if err == nil && ok {
			if sp.CheckoutType, err = co.ReqStr("type"); err == nil {
				switch sp.CheckoutType {
				case "branch":
					sp.CheckoutName, err = co.ReqStr("name")
				case "commit":
					sp.CheckoutSHA, err = co.ReqStr("sha")
				}
			}
		}
	case resources.KindMemoryStore:
		str("memory_store_id", &sp.MemoryStoreID)
		str("access", &sp.Access)
		str("instructions", &sp.Instructions)
	}
	return sp, err
}

// resourcesErr turns the resources layer's bad input into the service's.
func resourcesErr(err error) error {
	var ie *resources.InputError
	if !errors.As(err, &ie) {
		return err
	}
	return &InputError{Status: ie.Status, Field: ie.Field, Msg: ie.Error()}
}

// buildSessionResources checks the create request's resources; the rows
// are written once the session exists.
func (s *Service) buildSessionResources(ctx context.Context, tenantID string, in Obj, sessionID string) ([]*store.SessionResource, error) {
	if !in.Set("resources") {
		return nil, nil
	}
	list, err := in.Objects("resources")
	if err != nil || len(list) == 0 {
		return nil, err
	}
	if s.resources == nil {
		return nil, in.NotYet("resources", "this daemon runs without session resources")
	}
	specs := make([]resources.Spec, len(list))
	for i, o := range list {
		if specs[i], err = ParseResourceSpec(o); err != nil {
			return nil, err
		}
	}
	rs, err := s.resources.Build(ctx, tenantID, sessionID, in.Field("resources"), specs)
	return rs, resourcesErr(err)
}

// sessionResourcesJSON renders a session's resources for the session body.
func (s *Service) sessionResourcesJSON(ctx context.Context, sessionID string) ([]map[string]any, error) {
	out := []map[string]any{}
	if s.resources == nil {
		return out, nil
	}
	rs, err := s.resources.List(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	for _, x := range rs {
		out = append(out, resources.Render(x))
	}
	return out, nil
}
