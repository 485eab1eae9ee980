package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Canonical returns v as canonical JSON: object keys sorted by their
// UTF-8 bytes, no insignificant whitespace, numbers as written (so 1 and
// 1.0 differ, but a value never changes on the way), strings escaped the
// way encoding/json escapes them. A json.RawMessage is canonicalised as
// the JSON it holds, so args arriving from the wire and args built as Go
// values give the same text.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("journal: encode args: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("journal: args are not JSON: %w", err)
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, tree); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default: // string, json.Number, bool, nil: encoding/json writes them compactly
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("journal: encode %T: %w", x, err)
		}
		buf.Write(b)
	}
	return nil
}
