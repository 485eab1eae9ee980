package egress

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReplacingReader(t *testing.T) {
	creds := []Credential{
		{ID: "a", Placeholder: "PH-a", Value: "VALUE-A", Body: true},
		{ID: "ab", Placeholder: "PH-ab", Value: "VALUE-AB", Body: true}, // PH-a is a prefix of it
		{ID: "x", Placeholder: "PH-x", Value: "", Body: true},
	}
	subs := substitutions(creds, func(c Credential) bool { return c.Body })
	cases := map[string]string{
		"":                        "",
		"PH-a":                    "VALUE-A",
		"PH-ab":                   "VALUE-AB",
		"PH-aPH-ab PH-":           "VALUE-AVALUE-AB PH-",
		"xxPH-PH-abyy":            "xxPH-VALUE-AByy",
		"PH-x|PH-a|PH":            "|VALUE-A|PH",
		strings.Repeat("PH-a", 3): "VALUE-AVALUE-AVALUE-A",
		"no placeholder here":     "no placeholder here",
	}
	for in, want := range cases {
		for name, r := range map[string]io.Reader{
			"whole":   strings.NewReader(in),
			"onebyte": iotest.OneByteReader(strings.NewReader(in)),
			"half":    iotest.HalfReader(strings.NewReader(in)),
		} {
			got, err := io.ReadAll(newReplacingReader(io.NopCloser(r), subs))
			if err != nil || string(got) != want {
				t.Errorf("%s %q = %q, %v; want %q", name, in, got, err, want)
			}
		}
		if got := replaceAll([]byte(in), subs, nil); string(got) != want {
			t.Errorf("replaceAll %q = %q, want %q", in, got, want)
		}
	}
	// The carried tail stays shorter than the longest placeholder.
	r := newReplacingReader(io.NopCloser(iotest.OneByteReader(strings.NewReader(strings.Repeat("PH-", 1000)))), subs)
	buf := make([]byte, 1)
	for {
		_, err := r.Read(buf)
		if len(r.buf) >= len("PH-ab") {
			t.Fatalf("carried %d bytes", len(r.buf))
		}
		if err != nil {
			break
		}
	}
	if err := iotest.TestReader(newReplacingReader(io.NopCloser(strings.NewReader("aPH-ab")), subs), []byte("aVALUE-AB")); err != nil {
		t.Error(err)
	}
	_ = bytes.MinRead
}
