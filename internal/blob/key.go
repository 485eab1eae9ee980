package blob

import (
	"strings"
	"unicode/utf8"
)

// Key limits. MaxKeyLen is S3's own limit; MaxSegmentLen leaves room below the
// usual 255-byte file-name limit for fsblob's suffix and temp-file names.
const (
	MaxKeyLen     = 1024
	MaxSegmentLen = 200
)

// ReservedSuffix ends every blob file fsblob writes; a key segment may not end
// with it, so a blob "a" (file "a.blob") and a prefix "a.blob/" (directory)
// can never share a name.
const ReservedSuffix = ".blob"

// ValidateKey checks the rules every engine enforces, so a key that works on
// one backend works on all of them and can never name a path outside a
// backend's root. A key is 1..MaxKeyLen bytes of UTF-8, made of "/"-separated
// segments that are non-empty (no leading, trailing or doubled "/"), at most
// MaxSegmentLen bytes, do not start with "." (no "." or ".." traversal, and
// names starting with "." are kept for engines' own temp files), do not end
// with ReservedSuffix, and contain no backslash, NUL or other control byte,
// nor U+FFFE or U+FFFF, the two code points valid UTF-8 can carry that XML
// cannot (S3 lists keys in XML: such a key would drop out of List).
// The returned error is a *KeyError.
func ValidateKey(key string) error {
	if key == "" {
		return &KeyError{Key: key, Reason: "empty key"}
	}
	if len(key) > MaxKeyLen {
		return &KeyError{Key: key[:64] + "…", Reason: "longer than 1024 bytes"}
	}
	if !utf8.ValidString(key) {
		return &KeyError{Key: key, Reason: "not valid UTF-8"}
	}
	if strings.ContainsAny(key, "\uFFFE\uFFFF") {
		return &KeyError{Key: key, Reason: "contains U+FFFE or U+FFFF (not representable in XML)"}
	}
	if strings.HasPrefix(key, "/") {
		return &KeyError{Key: key, Reason: "absolute path: keys must not start with /"}
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\\':
			return &KeyError{Key: key, Reason: "contains a backslash"}
		case c == 0:
			return &KeyError{Key: key, Reason: "contains a NUL byte"}
		case c < 0x20 || c == 0x7f:
			return &KeyError{Key: key, Reason: "contains a control character"}
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := validateSegment(key, seg); err != nil {
			return err
		}
	}
	return nil
}

func validateSegment(key, seg string) error {
	switch {
	case seg == "":
		return &KeyError{Key: key, Reason: "empty path segment (leading, trailing or doubled /)"}
	case seg == "." || seg == "..":
		return &KeyError{Key: key, Reason: "contains a . or .. segment"}
	case strings.HasPrefix(seg, "."):
		return &KeyError{Key: key, Reason: "segment " + seg + " starts with . (reserved)"}
	case strings.HasSuffix(seg, ReservedSuffix):
		return &KeyError{Key: key, Reason: "segment " + seg + " ends with " + ReservedSuffix + " (reserved)"}
	case len(seg) > MaxSegmentLen:
		return &KeyError{Key: key, Reason: "segment longer than 200 bytes"}
	}
	return nil
}

// ValidatePrefix checks a List prefix. "" lists everything. Everything up to
// the last "/" must be valid key segments (that part names where an engine
// looks); the partial segment after it is only compared as a string, but may
// not hold bytes no key can contain.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.HasPrefix(prefix, "/") {
		return &KeyError{Key: prefix, Reason: "absolute prefix: prefixes must not start with /"}
	}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if err := ValidateKey(prefix[:i]); err != nil {
			return &KeyError{Key: prefix, Reason: "prefix: " + err.(*KeyError).Reason}
		}
	}
	if strings.ContainsFunc(prefix, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }) {
		return &KeyError{Key: prefix, Reason: "prefix contains a backslash, NUL or control character"}
	}
	return nil
}
