package blob

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	valid := []string{"a", "a/b", "backups/t1/s1/0001.tar.zst", "a..b", "a.b/c", "x.blob.d", "ümlaut/ключ",
		strings.Repeat("k", MaxSegmentLen), strings.Repeat("k/", MaxKeyLen/2-1) + "kk"}
	for _, k := range valid {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	invalid := map[string]string{
		"":                                   "empty key",
		"/etc/passwd":                        "absolute",
		"../x":                               ". or ..",
		"a/../../b":                          ". or ..",
		"a/.":                                ". or ..",
		`a\b`:                                "backslash",
		"a\x00b":                             "NUL",
		"a\tb":                               "control",
		"a//b":                               "empty path segment",
		"a/":                                 "empty path segment",
		".tmp-x":                             "starts with .",
		"x.blob":                             "reserved",
		"a/x.blob/b":                         "reserved",
		"bad\xff":                            "UTF-8",
		"a\uFFFEb":                           "U+FFFE",
		"a/\uFFFF":                           "U+FFFF",
		strings.Repeat("s", MaxSegmentLen+1): "segment longer",
		strings.Repeat("k", MaxKeyLen+1):     "longer than 1024",
	}
	for k, reason := range invalid {
		err := ValidateKey(k)
		var ke *KeyError
		if !errors.Is(err, ErrInvalidKey) || !errors.As(err, &ke) || !strings.Contains(ke.Reason, reason) {
			t.Errorf("ValidateKey(%q) = %v, want a KeyError saying %q", k, err, reason)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", "a/b", "a/.", "backups/s1"} {
		if err := ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"/", "/etc", "../", "a/../", "a//", `a\b`, "a\x00"} {
		if err := ValidatePrefix(p); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
}
