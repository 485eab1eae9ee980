package memory

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Limits of the SDK's memories (BetaMemoryStoreMemoryNewParams).
const (
	MaxContentBytes = 102400
	MaxPathBytes    = 1024
	MaxPathSegments = 20
)

// ErrTooLarge is wrapped by content over MaxContentBytes.
var ErrTooLarge = errors.New("memory content too large")

// CheckPath validates a memory path as the SDK defines it: it starts with
// "/", has 1 to 20 segments, none empty, "." or ".."; no control or format
// characters, no U+2028/U+2029; valid UTF-8 in NFC; at most 1,024 bytes.
// The path names a file under the store's mount in a sandbox, so this is
// also what keeps a memory from escaping that directory. Errors wrap
// store.ErrInvalid and say what is wrong.
func CheckPath(p string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("memory path %q: %s: %w", p, fmt.Sprintf(format, a...), store.ErrInvalid)
	}
	switch {
	case p == "":
		return bad("empty; a path starts with / (e.g. /notes/todo.md)")
	case len(p) > MaxPathBytes:
		return bad("%d bytes; the limit is %d", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case p[0] != '/':
		return bad("must start with /")
	case !norm.NFC.IsNormalString(p):
		return bad("not in Unicode Normalization Form C")
	}
	for _, r := range p {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return bad("contains the control or format character %U", r)
		}
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) > MaxPathSegments {
		return bad("%d segments; the limit is %d", len(segs), MaxPathSegments)
	}
	for _, s := range segs {
		switch s {
		case "":
			return bad("has an empty segment (a doubled or trailing /)")
		case ".", "..":
			return bad("has a %q segment", s)
		}
	}
	return nil
}

// CheckContent refuses content that is not UTF-8 text or exceeds
// MaxContentBytes (wrapping ErrTooLarge).
func CheckContent(c string) error {
	if len(c) > MaxContentBytes {
		return fmt.Errorf("memory content is %d bytes; the limit is %d (content): %w", len(c), MaxContentBytes, ErrTooLarge)
	}
	if !utf8.ValidString(c) {
		return fmt.Errorf("memory content is not valid UTF-8 text: %w", store.ErrInvalid)
	}
	return nil
}

// CheckPrefix validates a list path_prefix: "/" or a valid path ending in
// "/" (it matches whole segments).
func CheckPrefix(p string) error {
	if p == "/" {
		return nil
	}
	if !strings.HasSuffix(p, "/") {
		return fmt.Errorf("path prefix %q must end with / (it matches whole segments): %w", p, store.ErrInvalid)
	}
	return CheckPath(strings.TrimSuffix(p, "/"))
}
