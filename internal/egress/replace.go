package egress

import (
	"bytes"
	"io"
	"slices"
)

// substitution is one placeholder and the value that replaces it.
type substitution struct {
	id          string
	placeholder []byte
	value       []byte
}

func substitutions(creds []Credential, pick func(Credential) bool) []substitution {
	var out []substitution
	for _, c := range creds {
		if pick(c) && c.Placeholder != "" {
			out = append(out, substitution{id: c.ID, placeholder: []byte(c.Placeholder), value: []byte(c.Value)})
		}
	}
	// Longest first: when one placeholder is a prefix of another, the
	// longer one wins at the same position.
	slices.SortFunc(out, func(a, b substitution) int { return len(b.placeholder) - len(a.placeholder) })
	return out
}

// replaceAll substitutes every placeholder in b (leftmost, longest
// first) and reports which substitutions happened.
func replaceAll(b []byte, subs []substitution, used map[string]bool) []byte {
	out, rest := replaceChunk(nil, b, subs, true, used)
	return append(out, rest...)
}

// replaceChunk appends b to out with placeholders replaced, except for a
// tail that may be the start of a placeholder continued by the next
// chunk (only when !eof); the tail is returned to be prepended to the
// next chunk. The tail is shorter than the longest placeholder.
func replaceChunk(out, b []byte, subs []substitution, eof bool, used map[string]bool) ([]byte, []byte) {
	for {
		m, s := -1, -1
		for i, sub := range subs {
			if j := bytes.Index(b, sub.placeholder); j >= 0 && (m < 0 || j < m) {
				m, s = j, i // subs are longest first: ties keep the longer
			}
		}
		hold := len(b)
		if !eof {
			hold = partialStart(b, subs)
		}
		if m < 0 || m >= hold {
			return append(out, b[:hold]...), b[hold:]
		}
		out = append(out, b[:m]...)
		out = append(out, subs[s].value...)
		if used != nil {
			used[subs[s].id] = true
		}
		b = b[m+len(subs[s].placeholder):]
	}
}

// partialStart is the first position from which the rest of b is a
// proper prefix of some placeholder (len(b) when there is none): bytes
// from there on cannot be decided before more input arrives.
func partialStart(b []byte, subs []substitution) int {
	longest := 0
	for _, s := range subs {
		longest = max(longest, len(s.placeholder))
	}
	for i := max(0, len(b)-longest+1); i < len(b); i++ {
		for _, s := range subs {
			if len(b)-i < len(s.placeholder) && bytes.HasPrefix(s.placeholder, b[i:]) {
				return i
			}
		}
	}
	return len(b)
}

// replacingReader streams src with placeholders replaced. A placeholder
// split across reads is still found: the undecided tail is carried over.
type replacingReader struct {
	src  io.ReadCloser
	subs []substitution
	buf  []byte // read from src, not yet decided
	out  []byte // decided, not yet returned
	err  error
	used map[string]bool
}

func newReplacingReader(src io.ReadCloser, subs []substitution) *replacingReader {
	return &replacingReader{src: src, subs: subs, buf: make([]byte, 0, 32<<10)}
}

func (r *replacingReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if len(r.buf) == cap(r.buf) {
			r.buf = slices.Grow(r.buf, 32<<10)
		}
		n, err := r.src.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		r.err = err
		var rest []byte
		r.out, rest = replaceChunk(r.out[:0], r.buf, r.subs, err != nil, r.used)
		r.buf = append(r.buf[:0], rest...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *replacingReader) Close() error { return r.src.Close() }
