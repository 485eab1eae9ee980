package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Times are stored as unix microseconds.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// jsonObject validates an optional JSON object; empty means def.
func jsonObject(field string, raw json.RawMessage, def string) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return def, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return "", fmt.Errorf("%s must be a JSON object: %w", field, store.ErrInvalid)
	}
	return string(raw), nil
}

// jsonValue validates an optional JSON value; empty is stored as NULL.
func jsonValue(field string, raw json.RawMessage) (sql.NullString, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return sql.NullString{}, nil
	}
	if !json.Valid(raw) {
		return sql.NullString{}, fmt.Errorf("%s is not valid JSON: %w", field, store.ErrInvalid)
	}
	return sql.NullString{String: string(raw), Valid: true}, nil
}

func rawOrNil(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return json.RawMessage(v.String)
}

func encodeMap(m map[string]string) sql.NullString {
	if m == nil {
		return sql.NullString{}
	}
	b, _ := json.Marshal(m) // a map[string]string always marshals
	return sql.NullString{String: string(b), Valid: true}
}

func encodeTags(t []string) sql.NullString {
	if t == nil {
		return sql.NullString{}
	}
	b, _ := json.Marshal(t)
	return sql.NullString{String: string(b), Valid: true}
}

func decodeMap(v sql.NullString) (map[string]string, error) {
	if !v.Valid {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v.String), &m); err != nil {
		return nil, fmt.Errorf("sqlite: decode metadata: %w", err)
	}
	return m, nil
}

func decodeTags(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	var t []string
	if err := json.Unmarshal([]byte(v.String), &t); err != nil {
		return nil, fmt.Errorf("sqlite: decode tags: %w", err)
	}
	return t, nil
}

// mergeTopLevel merges patch's top-level keys into base (both JSON
// objects); a null value deletes the key.
func mergeTopLevel(base string, patch json.RawMessage) (string, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal([]byte(base), &b); err != nil || b == nil {
		b = map[string]json.RawMessage{}
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil || p == nil {
		return "", fmt.Errorf("state patch must be a JSON object: %w", store.ErrInvalid)
	}
	for k, v := range p {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	out, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("sqlite: encode merged state: %w", err)
	}
	return string(out), nil
}
