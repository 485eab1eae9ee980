package egress

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	good := map[string]string{
		"API.Example.com":   "api.example.com",
		"api.example.com.":  "api.example.com",
		"*.example.com":     "*.example.com",
		"127.0.0.1:8443":    "127.0.0.1:8443",
		"[::1]:8443":        "[::1]:8443",
		"::1":               "[::1]",
		"my_host.internal":  "my_host.internal",
		"example.com:65535": "example.com:65535",
	}
	for in, want := range good {
		hp, err := ParseHost(in)
		if err != nil {
			t.Errorf("ParseHost(%q): %v", in, err)
			continue
		}
		if hp.String() != want {
			t.Errorf("ParseHost(%q) = %s, want %s", in, hp, want)
		}
	}
	bad := map[string]string{
		"":                       "empty",
		"https://example.com":    "URL",
		"example.com/path":       "path",
		"user@example.com":       "user info",
		"example.com:0":          "port",
		"example.com:99999":      "port",
		"example.com:08":         "port",
		"*example.com":           "wildcard",
		"a.*.example.com":        "wildcard",
		"*.com":                  "two labels",
		"-bad.example.com":       "hyphen",
		"exa mple.com":           "space",
		"ex..ample.com":          "1 to 63",
		"bücher.de":              "punycode",
		"::1:8443:x":             "brackets",
		"[::1":                   "unclosed",
		"[127.0.0.1]:80":         "IPv6",
		strings.Repeat("a", 300): "longer",
	}
	for in, reason := range bad {
		_, err := ParseHost(in)
		if err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParseHost(%q) = %v, want an error saying %q", in, err, reason)
		}
	}
	if _, err := ParseHosts([]string{"ok.example.com", "not a host"}); err == nil || !strings.HasPrefix(err.Error(), "[1]: ") {
		t.Errorf("ParseHosts error %v does not name the index", err)
	}
}

func TestPolicyAllows(t *testing.T) {
	p := &Policy{Allow: mustHosts("api.example.com", "*.svc.example.com", "127.0.0.1:9000")}
	cases := []struct {
		host string
		port int
		want bool
	}{
		{"api.example.com", 443, true},
		{"api.example.com", 80, true},
		{"api.example.com", 8443, false},
		{"a.svc.example.com", 443, true},
		{"svc.example.com", 443, false},
		{"127.0.0.1", 9000, true},
		{"127.0.0.1", 9001, false},
		{"evil.com", 443, false},
	}
	for _, c := range cases {
		if got := p.Allows(c.host, c.port); got != c.want {
			t.Errorf("limited Allows(%s:%d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	u := &Policy{Unrestricted: true, Allow: mustHosts("127.0.0.1:9000")}
	for host, want := range map[string]bool{"evil.com": true, "93.184.216.34": true, "127.0.0.1": false, "localhost": false, "169.254.169.254": false, "::1": false,
		"10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "100.64.0.1": false, "fd00::1": false} {
		if got := u.Allows(host, 80); got != want {
			t.Errorf("unrestricted Allows(%s:80) = %v, want %v", host, got, want)
		}
	}
	if !u.Allows("127.0.0.1", 9000) {
		t.Error("unrestricted refuses an internal host named in Allow")
	}
	var nilp *Policy
	if nilp.Allows("example.com", 443) {
		t.Error("a nil policy allows")
	}
}

func TestCredentialsForAndRedaction(t *testing.T) {
	c1 := Credential{ID: "vcrd_1", EnvVar: "A", Placeholder: Placeholder("vcrd_1"), Value: "s3cret-1", Header: true, Hosts: mustHosts("api.example.com")}
	c2 := Credential{ID: "vcrd_2", EnvVar: "B", Placeholder: Placeholder("vcrd_2"), Value: "s3cret-2", Body: true}
	p := &Policy{Allow: mustHosts("api.example.com", "other.example.com"), Credentials: []Credential{c1, c2}}
	if got := p.CredentialsFor("api.example.com", 443); len(got) != 2 {
		t.Errorf("api.example.com gets %d credentials, want 2", len(got))
	}
	if got := p.CredentialsFor("other.example.com", 443); len(got) != 1 || got[0].ID != "vcrd_2" {
		t.Errorf("other.example.com gets %v, want only vcrd_2", got)
	}
	if got := p.CredentialsFor("evil.com", 443); got != nil {
		t.Errorf("a refused host gets credentials %v", got)
	}
	for _, s := range []string{c1.String(), c1.GoString()} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("credential formats with its value: %s", s)
		}
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{"Example.com:8443": "example.com 8443", "example.com": "example.com 443", "[::1]:80": "::1 80"} {
		h, p, err := HostPort(in, 443)
		if err != nil || h+" "+itoa(p) != want {
			t.Errorf("HostPort(%q) = %q %d %v, want %s", in, h, p, err, want)
		}
	}
	if _, _, err := HostPort("example.com:x", 443); err == nil {
		t.Error("a bad port parses")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
