package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decodeJSON reads the request body strictly into v: a JSON object, no
// unknown fields, nothing after it, within the body limit. Every failure is
// a 4xx that names the problem.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return Errorf(http.StatusUnsupportedMediaType, TypeInvalidRequest, "Content-Type must be application/json, got %q", ct)
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		if err != nil {
			if e := asTooLarge(err); e != nil {
				return e
			}
		}
		return BadRequest("request body must hold a single JSON object; found data after it")
	}
	return nil
}

func jsonError(err error) error {
	if e := asTooLarge(err); e != nil {
		return e
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return BadRequest("request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("malformed JSON: unexpected end of body")
	case errors.As(err, &syn):
		return BadRequest("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return BadRequest("field %q: expected %s, got JSON %s", typ.Field, typ.Type, typ.Value)
		}
		return BadRequest("expected a JSON %s, got JSON %s", typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return BadRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return BadRequest("malformed JSON: %v", err)
}

func asTooLarge(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
			"request body exceeds the limit of %d bytes (server.max_body_bytes)", mbe.Limit)
	}
	return nil
}

// requireField is a small helper for "field X is required" errors.
func requireField(name, value string) error {
	if strings.TrimSpace(value) == "" {
		return BadRequest("field %q is required", name)
	}
	return nil
}

// maxLen refuses strings over n bytes, naming the field and the limit.
func maxLen(name, value string, n int) error {
	if len(value) > n {
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field %q is %d bytes; the limit is %d", name, len(value), n)
	}
	return nil
}

// jsonUnmarshal decodes stored JSON; empty means "leave v as is".
func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}
