package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentkernel/agentkernel/internal/store"
)

// jsonArg validates raw and returns it as a query argument: nil (SQL NULL)
// when raw is empty, else the text unchanged so opaque values round-trip.
func jsonArg(field string, raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s is not valid JSON: %w", field, store.ErrInvalid)
	}
	return string(raw), nil
}

// objectArg is jsonArg for values that must be JSON objects; empty means {}.
func objectArg(field string, raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}", nil
	}
	if _, err := decodeObject(field, raw); err != nil {
		return "", err
	}
	return string(raw), nil
}

func decodeObject(field string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s must be a JSON object: %w", field, store.ErrInvalid)
	}
	return m, nil
}

// mergeObject merges the top-level keys of patch into base; a null value in
// patch deletes the key (seed 004 mergeCustomState).
func mergeObject(base, patch json.RawMessage) (json.RawMessage, error) {
	p, err := decodeObject("state patch", patch)
	if err != nil {
		return nil, err
	}
	if len(p) == 0 {
		return base, nil
	}
	b := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(base)) > 0 {
		if b, err = decodeObject("custom state", base); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if bytes.Equal(bytes.TrimSpace(p[k]), []byte("null")) {
			delete(b, k)
			continue
		}
		b[k] = p[k]
	}
	return json.Marshal(b)
}

// metadataArg stores an empty map as NULL so it reads back as nil.
func metadataArg(m map[string]string) (any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

func tagsArg(tags []string) (any, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(tags)
	return string(b), err
}

func decodeMetadata(raw []byte) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

func decodeTags(raw []byte) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var t []string
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("decode tags: %w", err)
	}
	if len(t) == 0 {
		return nil, nil
	}
	return t, nil
}

// rawOrNil returns nil for an empty column so callers see a nil RawMessage.
func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// nullToNil maps a decoded JSON null back to a nil RawMessage.
func nullToNil(raw json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}
