package objectserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ServeHTTP implements the in-sandbox protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case HealthPath:
		if r.Method != http.MethodGet {
			notAllowed(w, "GET")
			return
		}
		w.Header().Set(HeaderObjects, ObjectsMany)
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
	case StoragePath:
		id := r.Header.Get(HeaderObjectID)
		switch r.Method {
		case http.MethodGet:
			s.dump(w, id)
		case http.MethodPost:
			s.restore(w, r, id)
		case http.MethodDelete:
			s.stores.forget(id)
			w.WriteHeader(http.StatusNoContent)
		default:
			notAllowed(w, "GET, POST, DELETE")
		}
	default:
		if r.Method != http.MethodPost {
			notAllowed(w, "POST")
			return
		}
		s.call(w, r)
	}
}

func (s *Server) dump(w http.ResponseWriter, id string) {
	st := s.stores.peek(id)
	if st == nil {
		writeJSON(w, http.StatusOK, []byte(`{}`))
		return
	}
	b, err := st.dump()
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("dump storage: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// restore replaces the object's whole storage: keys absent from the body
// are gone.
func (s *Server) restore(w http.ResponseWriter, r *http.Request, id string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v", err))
		return
	}
	var data map[string]json.RawMessage
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &data); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("restore storage: body must be a JSON object of key to value: %v", err))
			return
		}
	}
	for k, v := range data {
		// Unmarshal keeps raw values as sent; compact them so stored values
		// look the same whether they came from a restore or a Put.
		var b bytes.Buffer
		if err := json.Compact(&b, v); err == nil {
			data[k] = b.Bytes()
		}
	}
	s.stores.get(id).replace(data)
	writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
}

func (s *Server) call(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	st := &Storage{s: s.stores.get(r.Header.Get(HeaderObjectID))}
	body, err := io.ReadAll(r.Body)
	args := json.RawMessage(strings.TrimSpace(string(body)))
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	c := newCall(r, name, args, st)
	var result any
	switch h, ok := s.handler(name); {
	case err != nil:
		err = Errorf(http.StatusBadRequest, "read args: %v", err)
	case !ok:
		err = Errorf(http.StatusNotFound, "unknown method %q", name)
	case !json.Valid(args):
		err = Errorf(http.StatusBadRequest, "args are not valid JSON")
	default:
		result, err = invoke(h, c)
	}
	var raw []byte
	if err == nil {
		if raw, err = json.Marshal(result); err != nil {
			err = fmt.Errorf("encode result of %q: %w", name, err)
		}
	}
	writes := st.finish()
	if c.Mode == ModeWriteThrough {
		w.Header().Set(HeaderEnvelope, "1")
	}
	if err != nil {
		msg, _ := json.Marshal(err.Error())
		writeEnvelope(w, c.Mode, statusOf(err), "error", msg, writes)
		return
	}
	writeEnvelope(w, c.Mode, http.StatusOK, "result", raw, writes)
}

// invoke runs h, turning a panic into a 500 so the writes made before it
// are still reported.
func invoke(h HandlerFunc, c *Call) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, fmt.Errorf("method %q panicked: %v", c.Method, p)
		}
	}()
	return h(c)
}

// writeEnvelope writes {field: value} in snapshot mode and
// {field: value, "writes": […]} in write-through mode.
func writeEnvelope(w http.ResponseWriter, mode string, status int, field string, value []byte, writes []write) {
	if mode != ModeWriteThrough {
		if field == "result" {
			writeJSON(w, status, value)
			return
		}
		writeJSON(w, status, []byte(`{"error":`+string(value)+`}`))
		return
	}
	ws, err := json.Marshal(writes)
	if err != nil { // cannot happen: every value was marshalled by Put
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("encode writes: %v", err))
		return
	}
	writeJSON(w, status, []byte(`{"`+field+`":`+string(value)+`,"writes":`+string(ws)+`}`))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func notAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed; use "+allow)
}
