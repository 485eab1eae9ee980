package objectserver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

func post(t *testing.T, url, mode, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if mode != "" {
		req.Header.Set(objectserver.HeaderStorageMode, mode)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestErrorStatus(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"value", objectserver.Error{Status: 418, Message: "teapot"}, 418, "teapot"},
		{"pointer", &objectserver.Error{Status: 422, Message: "bad"}, 422, "bad"},
		{"Errorf", objectserver.Errorf(409, "key %q taken", "k"), 409, `key "k" taken`},
		{"wrapped pointer", fmt.Errorf("ctx: %w", objectserver.Errorf(429, "slow down")), 429, "ctx: slow down"},
		{"plain", errors.New("plain"), 500, "plain"},
		{"2xx status is not an error status", objectserver.Error{Status: 200, Message: "ok?"}, 500, "ok?"},
		{"no status", objectserver.Error{Message: "zero"}, 500, "zero"},
		{"nil pointer in chain", fmt.Errorf("x: %w", (*objectserver.Error)(nil)), 500, ""},
	}
	s := objectserver.New()
	for i, tc := range cases {
		s.Method(fmt.Sprint("m", i), func(*objectserver.Call) (any, error) { return nil, tc.err })
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, fmt.Sprint(srv.URL, "/m", i), "", "")
			if status != tc.status {
				t.Errorf("status %d, want %d (body %s)", status, tc.status, body)
			}
			var got struct{ Error string }
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if tc.msg != "" && got.Error != tc.msg {
				t.Errorf("error %q, want %q", got.Error, tc.msg)
			}
		})
	}
}

// A panicking handler is a 500, and the writes it made before panicking are
// still reported: they were applied.
func TestPanicKeepsWrites(t *testing.T) {
	s := objectserver.New()
	s.Method("half", func(c *objectserver.Call) (any, error) {
		if err := c.Storage().Put("first", 1); err != nil {
			return nil, err
		}
		panic("halfway")
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	status, body := post(t, srv.URL+"/half", objectserver.ModeWriteThrough, "")
	if status != 500 {
		t.Fatalf("status %d, want 500", status)
	}
	var got struct {
		Error  string
		Writes []map[string]any
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Error, "halfway") || len(got.Writes) != 1 || got.Writes[0]["key"] != "first" {
		t.Errorf("body %s: want the panic message and the write of \"first\"", body)
	}
}

// Storage kept past the handler's return refuses writes: in write-through
// mode they could never reach the daemon.
func TestStorageAfterReturn(t *testing.T) {
	s := objectserver.New()
	var kept *objectserver.Storage
	s.Method("keep", func(c *objectserver.Call) (any, error) {
		kept = c.Storage()
		return nil, nil
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if status, body := post(t, srv.URL+"/keep", "", ""); status != 200 || body != "null" {
		t.Fatalf("keep: %d %s, want 200 null", status, body)
	}
	if err := kept.Put("late", 1); !errors.Is(err, objectserver.ErrCallDone) {
		t.Errorf("Put after return: %v, want ErrCallDone", err)
	}
	if err := kept.Delete("late"); !errors.Is(err, objectserver.ErrCallDone) {
		t.Errorf("Delete after return: %v, want ErrCallDone", err)
	}
	if ok, err := kept.Get("late", new(int)); ok || err != nil {
		t.Errorf("Get(late) = %v, %v; the refused Put must not have stored it", ok, err)
	}
}

func TestStorageValues(t *testing.T) {
	s := objectserver.New()
	s.Method("roundtrip", func(c *objectserver.Call) (any, error) {
		st := c.Storage()
		if err := st.Put("", 1); !errors.Is(err, objectserver.ErrEmptyKey) {
			return nil, fmt.Errorf("Put(\"\"): %v, want ErrEmptyKey", err)
		}
		if err := st.Put("ch", make(chan int)); err == nil {
			return nil, errors.New("Put of a channel succeeded")
		}
		m := map[string]int{"a": 1}
		if err := st.Put("m", m); err != nil {
			return nil, err
		}
		m["a"] = 2 // must not change the stored value
		var back map[string]int
		if ok, err := st.Get("m", &back); !ok || err != nil || back["a"] != 1 {
			return nil, fmt.Errorf("Get(m) = %v, %v, %v; want map[a:1]", back, ok, err)
		}
		var wrong string
		if _, err := st.Get("m", &wrong); err == nil {
			return nil, errors.New("Get of an object into a string succeeded")
		}
		if raw := st.GetRaw("m"); string(raw) != `{"a":1}` {
			return nil, fmt.Errorf("GetRaw(m) = %s", raw)
		}
		if raw := st.GetRaw("missing"); raw != nil {
			return nil, fmt.Errorf("GetRaw(missing) = %s, want nil", raw)
		}
		return st.Keys(), nil
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if status, body := post(t, srv.URL+"/roundtrip", "", ""); status != 200 || body != `["m"]` {
		t.Fatalf("roundtrip: %d %s", status, body)
	}
}

func TestMethodRegistrationPanics(t *testing.T) {
	ok := func(*objectserver.Call) (any, error) { return nil, nil }
	for name, reg := range map[string]func(s *objectserver.Server){
		"empty name":    func(s *objectserver.Server) { s.Method("", ok) },
		"slash":         func(s *objectserver.Server) { s.Method("a/b", ok) },
		"reserved":      func(s *objectserver.Server) { s.Method("__storage", ok) },
		"nil handler":   func(s *objectserver.Server) { s.Method("m", nil) },
		"registered 2x": func(s *objectserver.Server) { s.Method("m", ok); s.Method("m", ok) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			reg(objectserver.New())
		})
	}
}

func TestAddrFromEnv(t *testing.T) {
	t.Setenv(objectserver.PortEnv, "")
	if got := objectserver.Addr(); got != "127.0.0.1:9333" {
		t.Errorf("Addr() = %q, want 127.0.0.1:9333", got)
	}
	t.Setenv(objectserver.PortEnv, "40123")
	if got := objectserver.Addr(); got != "127.0.0.1:40123" {
		t.Errorf("Addr() = %q with %s=40123", got, objectserver.PortEnv)
	}
}
