package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// navItem is an entry of the console's top navigation.
type navItem struct {
	Label, Path string
	// Admin: shown to admin keys only.
	Admin bool
	// Current: the page shown is in this section.
	Current bool
}

// addNav adds a section to the top navigation (in the order sections
// register).
func (c *Console) addNav(n navItem) { c.nav = append(c.nav, n) }

// page is what every page template gets.
type page struct {
	Title   string
	Section string
	User    *user
	Nav     []navItem
	CSRF    string
	Version string
	Data    any
}

// parseTemplates parses each page with the layout and the shared
// partials: pages are templates/<name>.html defining "content" (and
// optionally "title").
func (c *Console) parseTemplates() error {
	c.pages = map[string]*template.Template{}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	var shared []string
	var pages []string
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" || strings.HasPrefix(base, "_") {
			shared = append(shared, n)
		} else {
			pages = append(pages, n)
		}
	}
	for _, p := range pages {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, append(append([]string{}, shared...), p)...)
		if err != nil {
			return fmt.Errorf("console template %s: %w", p, err)
		}
		c.pages[strings.TrimSuffix(path.Base(p), ".html")] = t
	}
	return nil
}

// render writes a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, u *user, status int, name string, data any) {
	t := c.pages[name]
	if t == nil {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	p := page{Section: name, User: u, Version: c.o.Version, Data: data}
	if u != nil {
		p.CSRF = u.csrf
		for _, n := range c.nav {
			if !n.Admin || u.Principal.Admin {
				n.Current = r.URL.Path == n.Path || strings.HasPrefix(r.URL.Path, n.Path+"/")
				p.Nav = append(p.Nav, n)
			}
		}
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.o.Log.ErrorContext(r.Context(), "console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fragment writes a template defined in a page's set alone (HTML pieces
// the script inserts: older events, live events).
func (c *Console) fragment(w http.ResponseWriter, r *http.Request, pageName, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages[pageName].ExecuteTemplate(&buf, name, data); err != nil {
		c.o.Log.ErrorContext(r.Context(), "console: render fragment", "fragment", name, "err", err)
		http.Error(w, "the fragment could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// fail shows an error page; an API error keeps its status and message.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, u *user, status int, msg string) {
	c.render(w, r, u, status, "error", map[string]any{"Status": status, "Message": msg})
}

// failAPI shows what an API call answered.
func (c *Console) failAPI(w http.ResponseWriter, r *http.Request, u *user, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		msg := ae.Message
		if ae.Status == http.StatusNotFound {
			msg = "Not found (or not yours to see)."
		}
		c.fail(w, r, u, ae.Status, msg)
		return
	}
	c.o.Log.ErrorContext(r.Context(), "console: API call", "err", err)
	c.fail(w, r, u, http.StatusInternalServerError, "Something went wrong; see the daemon log.")
}

var funcs = template.FuncMap{
	"ago":    ago,
	"pretty": pretty,
	"tokens": tokens,
	"prefix": func() string { return Prefix },
	"short": func(s string, n int) string {
		if len(s) <= n {
			return s
		}
		return s[:n] + "…"
	},
	"lines": func(s string) int { return strings.Count(s, "\n") + 1 },
	"bytes": byteSize,
	// dict builds a map for a partial: dict "Key" value "Key2" value2.
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			m[k] = kv[i+1]
		}
		return m
	},
}

// ago is a time as "3m ago" (its exact value is in the title).
// nextPage is the link to the page of a list after this one: the list's
// path with the filters it was asked with (those of keys that are set in
// asked) and the cursor the API gave, under cursorKey; "" when the API
// said there is no next page (an empty cursor).
func nextPage(path string, asked url.Values, keys []string, cursorKey, cursor string) string {
	if cursor == "" {
		return ""
	}
	q := url.Values{cursorKey: {cursor}}
	for _, k := range keys {
		if v := asked.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	return Prefix + path + "?" + q.Encode()
}

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// pretty indents JSON for reading.
func pretty(v any) string {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		var buf bytes.Buffer
		if json.Indent(&buf, x, "", "  ") == nil {
			return string(unescapeHTML(buf.Bytes()))
		}
		return string(x)
	default:
		b, _ = json.MarshalIndent(x, "", "  ")
	}
	return string(b)
}

// tokens is a token count for people: 1234 → "1.2k".
func tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// unescapeHTML undoes the \u0026, \u003c and \u003e escapes JSON encoders
// write for &, < and > (a bash command reads "a && b" again); the
// template escapes what it shows.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			case "003c", "003C":
				out, i = append(out, '<'), i+5
				continue
			case "003e", "003E":
				out, i = append(out, '>'), i+5
				continue
			}
		}
		// Another escape: copy it whole (a "\\" must not start one).
		out, i = append(out, b[i], b[i+1]), i+1
	}
	return out
}
