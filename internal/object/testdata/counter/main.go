// Command counter is a test-only durable object server speaking the
// in-sandbox protocol (internal/object/doc.go), write-through envelope
// included. The real helper libraries live elsewhere; this one keeps the
// runtime's tests independent of them. It keeps storage per object id
// (X-Agentkernel-Object-Id) and says so on GET /__health, unless
// COUNTER_SINGLE=1 makes it an old single-object server: one storage
// whatever the id, and no X-Agentkernel-Objects header.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type write struct {
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value,omitempty"`
	Delete bool            `json:"delete,omitempty"`
}

type server struct {
	mu      sync.Mutex
	single  bool
	objects map[string]map[string]json.RawMessage // id → storage

	// Not storage: what the tests ask about the calls this process saw.
	conns       atomic.Int64 // TCP connections accepted
	inflight    atomic.Int64
	maxInflight atomic.Int64
	seqs        []int64 // "record" calls, in the order they ran
	hangups     int64
}

func main() {
	port := os.Getenv("AGENTKERNEL_OBJECT_PORT")
	if port == "" {
		port = "9333"
	}
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	s := &server{objects: map[string]map[string]json.RawMessage{}, single: os.Getenv("COUNTER_SINGLE") == "1"}
	hs := &http.Server{Addr: "127.0.0.1:" + port, Handler: s, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	if err := hs.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// storageOf returns an object's storage (the caller holds s.mu).
func (s *server) storageOf(r *http.Request) map[string]json.RawMessage {
	id := r.Header.Get("X-Agentkernel-Object-Id")
	if s.single {
		id = ""
	}
	st, ok := s.objects[id]
	if !ok {
		st = map[string]json.RawMessage{}
		s.objects[id] = st
	}
	return st
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/__health":
		if !s.single {
			w.Header().Set("X-Agentkernel-Objects", "many")
		}
		w.WriteHeader(200)
		return
	case r.URL.Path == "/__storage" && r.Method == http.MethodGet:
		s.mu.Lock()
		b, _ := json.Marshal(s.storageOf(r))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	case r.URL.Path == "/__storage" && r.Method == http.MethodPost:
		st := map[string]json.RawMessage{}
		if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s.mu.Lock()
		id := r.Header.Get("X-Agentkernel-Object-Id")
		if s.single {
			id = ""
		}
		s.objects[id] = st
		s.mu.Unlock()
		w.WriteHeader(204)
		return
	case r.URL.Path == "/__storage" && r.Method == http.MethodDelete:
		s.mu.Lock()
		if !s.single {
			delete(s.objects, r.Header.Get("X-Agentkernel-Object-Id"))
		}
		s.mu.Unlock()
		w.WriteHeader(204)
		return
	}
	var args map[string]any
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &args)
	if r.URL.Path == "/hangup" {
		// Changes the storage in memory, then hangs up without answering:
		// the daemon must report the broken call, not send it again.
		s.mu.Lock()
		st := s.storageOf(r)
		var n int64
		_ = json.Unmarshal(st["count"], &n)
		st["count"], _ = json.Marshal(n + 1000)
		s.hangups++
		s.mu.Unlock()
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	wt := r.Header.Get("X-Agentkernel-Storage-Mode") == "write-through"
	status, result, writes := s.method(strings.TrimPrefix(r.URL.Path, "/"), args, r)
	w.Header().Set("Content-Type", "application/json")
	if !wt {
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(result)
		return
	}
	env := map[string]any{"writes": writes}
	if status/100 == 2 {
		env["result"] = result
	} else {
		env["error"] = result
	}
	w.Header().Set("X-Agentkernel-Envelope", "1")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(env)
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// method runs a method; writes are what it stored, in order.
func (s *server) method(name string, args map[string]any, r *http.Request) (int, any, []write) {
	h := r.Header
	s.mu.Lock()
	defer s.mu.Unlock()
	storage := s.storageOf(r)
	var writes []write
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		storage[k] = b
		writes = append(writes, write{Key: k, Value: b})
	}
	count := func() int64 {
		var n int64
		_ = json.Unmarshal(storage["count"], &n)
		return n
	}
	switch name {
	case "increment":
		amount := num(args["amount"])
		if amount == 0 {
			amount = 1
		}
		set("count", count()+amount)
		return 200, map[string]any{"value": count()}, writes
	case "rincrement":
		// A read-modify-write that loses updates unless calls are
		// delivered one at a time.
		n := count()
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
		set("count", n+1)
		return 200, map[string]any{"value": n + 1}, writes
	case "get":
		return 200, map[string]any{"value": count()}, nil
	case "pid":
		return 200, map[string]any{"value": os.Getpid()}, nil
	case "conns":
		return 200, map[string]any{"value": s.conns.Load()}, nil
	case "hangups":
		return 200, map[string]any{"value": s.hangups}, nil
	case "record":
		// record {"seq": N, "ms": M}: runs for M ms (default 2) without the
		// lock, so calls the runtime delivered at once overlap here.
		s.mu.Unlock()
		n := s.inflight.Add(1)
		for {
			m := s.maxInflight.Load()
			if n <= m || s.maxInflight.CompareAndSwap(m, n) {
				break
			}
		}
		ms := num(args["ms"])
		if ms == 0 {
			ms = 2
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		s.inflight.Add(-1)
		s.mu.Lock()
		s.seqs = append(s.seqs, num(args["seq"]))
		return 200, map[string]any{"value": len(s.seqs)}, nil
	case "records":
		return 200, map[string]any{"seqs": s.seqs, "max_inflight": s.maxInflight.Load()}, nil
	case "put":
		set(fmt.Sprint(args["key"]), args["value"])
		return 200, map[string]any{"keys": len(storage)}, writes
	case "fill":
		// fill {"keys": N, "bytes": B}: N keys of B-byte strings.
		n, b := num(args["keys"]), num(args["bytes"])
		v := strings.Repeat("x", int(b))
		for i := range n {
			set("k"+strconv.FormatInt(i, 10), v)
		}
		return 200, map[string]any{"keys": len(storage)}, writes
	case "del":
		k := fmt.Sprint(args["key"])
		delete(storage, k)
		writes = append(writes, write{Key: k, Delete: true})
		return 200, nil, writes
	case "fail":
		st := int(num(args["status"]))
		if st == 0 {
			st = 418
		}
		set("failed_once", true)
		return st, map[string]any{"message": "failed on purpose"}, writes
	case "slow":
		s.mu.Unlock()
		time.Sleep(time.Duration(num(args["ms"])) * time.Millisecond)
		s.mu.Lock()
		set("count", count()+1)
		return 200, map[string]any{"value": count()}, writes
	case "alarm":
		// alarm {"fail_until_retry": N}: fails while the retry count is
		// below N; records every delivery it sees.
		retry, _ := strconv.Atoi(h.Get("X-Agentkernel-Alarm-Retry-Count"))
		var seen []map[string]any
		_ = json.Unmarshal(storage["alarm_deliveries"], &seen)
		seen = append(seen, map[string]any{"id": h.Get("X-Agentkernel-Alarm-Id"), "retry": retry, "is_retry": h.Get("X-Agentkernel-Alarm-Is-Retry"), "tag": args["tag"]})
		set("alarm_deliveries", seen)
		if retry < int(num(args["fail_until_retry"])) {
			return 500, map[string]any{"message": "not yet"}, writes
		}
		set("count", count()+1)
		return 200, map[string]any{"value": count()}, writes
	case "objects":
		// How many objects this process holds storage of.
		return 200, map[string]any{"value": len(s.objects)}, nil
	case "echo":
		return 200, map[string]any{"args": args, "class": h.Get("X-Agentkernel-Object-Class"), "id": h.Get("X-Agentkernel-Object-Id"), "mode": h.Get("X-Agentkernel-Storage-Mode")}, nil
	case "crash":
		os.Exit(3)
	}
	return 404, map[string]any{"message": "no method " + name}, nil
}
