package objectserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
)

var (
	// ErrCallDone is returned by Storage writes made after the handler
	// returned: they would change the object without the daemon hearing of
	// them in write-through mode.
	ErrCallDone = errors.New("objectserver: storage used after the method returned")
	// ErrEmptyKey is returned for the key "".
	ErrEmptyKey = errors.New("objectserver: storage key must not be empty")
)

// store is an object's storage, shared by all calls. Values are kept as
// encoded JSON so a handler never aliases stored data.
type store struct {
	mu   sync.Mutex
	data map[string]json.RawMessage
}

func newStore() *store { return &store{data: map[string]json.RawMessage{}} }

// stores holds the storage of every object the server serves, by object
// id: the daemon gives one server many objects when their class has
// isolation "class", and each sees only its own storage. Calls to
// different objects run concurrently; each object's lock is its own.
type stores struct {
	mu   sync.Mutex
	byID map[string]*store
}

func newStores() *stores { return &stores{byID: map[string]*store{}} }

// get returns the object's storage, empty if the server never held it.
func (s *stores) get(id string) *store {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	if !ok {
		st = newStore()
		s.byID[id] = st
	}
	return st
}

// peek returns the object's storage without creating it (nil if none).
func (s *stores) peek(id string) *store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// forget drops the object's storage (it hibernated or was deleted).
func (s *stores) forget(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

// dump encodes the whole storage as one JSON object.
func (s *store) dump() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(s.data)
}

// replace swaps the whole storage for data (the daemon's wake restore).
func (s *store) replace(data map[string]json.RawMessage) {
	if data == nil {
		data = map[string]json.RawMessage{}
	}
	s.mu.Lock()
	s.data = data
	s.mu.Unlock()
}

// write is one storage change as the write-through envelope reports it.
type write struct {
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value,omitempty"`
	Delete bool            `json:"delete,omitempty"`
}

// Storage is the object's key-value storage as one call sees it. Its methods
// are safe for concurrent use. Every Put and Delete is recorded, in order, so
// write-through mode can report them to the daemon.
type Storage struct {
	s      *store
	writes []write // guarded by s.mu, so the order matches the order applied
	done   bool    // guarded by s.mu
}

// Get decodes the value at key into v and reports whether the key exists.
// A missing key leaves v untouched.
func (st *Storage) Get(key string, v any) (bool, error) {
	st.s.mu.Lock()
	raw, ok := st.s.data[key]
	st.s.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("objectserver: storage key %q: %w", key, err)
	}
	return true, nil
}

// GetRaw returns the encoded JSON at key, or nil when the key is missing.
func (st *Storage) GetRaw(key string) json.RawMessage {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if raw, ok := st.s.data[key]; ok {
		return append(json.RawMessage(nil), raw...)
	}
	return nil
}

// Put stores v, encoded as JSON, at key.
func (st *Storage) Put(key string, v any) error {
	if key == "" {
		return ErrEmptyKey
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("objectserver: storage key %q: value is not JSON: %w", key, err)
	}
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if st.done {
		return ErrCallDone
	}
	st.s.data[key] = raw
	st.writes = append(st.writes, write{Key: key, Value: raw})
	return nil
}

// Delete removes key. Deleting a missing key is not an error (and is still
// reported, so the daemon's copy converges whatever it held).
func (st *Storage) Delete(key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if st.done {
		return ErrCallDone
	}
	delete(st.s.data, key)
	st.writes = append(st.writes, write{Key: key, Delete: true})
	return nil
}

// Keys returns every key, sorted.
func (st *Storage) Keys() []string {
	st.s.mu.Lock()
	keys := make([]string, 0, len(st.s.data))
	for k := range st.s.data {
		keys = append(keys, k)
	}
	st.s.mu.Unlock()
	sort.Strings(keys)
	return keys
}

// finish stops further writes and returns the ones made, in order.
func (st *Storage) finish() []write {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	st.done = true
	if st.writes == nil {
		return []write{}
	}
	return st.writes
}
