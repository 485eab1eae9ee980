package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/managed"
)

// obj is a Managed Agents request body read field by field (see
// managed.Obj); the other domains' handlers read their bodies with it too.
type obj = managed.Obj

// decodeObject reads the request body as one JSON object within the body
// limit. An empty body is an empty object (archive calls send none).
func decodeObject(r *http.Request) (obj, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return obj{}, Errorf(http.StatusUnsupportedMediaType, TypeInvalidRequest, "Content-Type must be application/json, got %q", ct)
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if e := asTooLarge(err); e != nil {
			return obj{}, e
		}
		return obj{}, BadRequest("reading the request body: %v", err)
	}
	return managed.ParseBody(body)
}

// managedErr turns the Managed Agents service's refusal into the API's
// error; other errors pass unchanged.
func managedErr(err error) error {
	var ie *managed.InputError
	if !errors.As(err, &ie) {
		return err
	}
	typ := TypeInvalidRequest
	switch ie.Status {
	case http.StatusNotFound:
		typ = TypeNotFound
	case http.StatusConflict:
		typ = TypeConflict
	case http.StatusRequestEntityTooLarge:
		typ = TypeRequestTooLarge
	}
	return Errorf(ie.Status, typ, "%s", ie.Msg)
}

// mustJSON marshals values agentkernel built itself.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("api: marshal %T: %v", v, err))
	}
	return b
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmptyArray(b json.RawMessage) json.RawMessage { return orDefault(b, json.RawMessage(`[]`)) }

func orDefault(b, def json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return def
	}
	return b
}
