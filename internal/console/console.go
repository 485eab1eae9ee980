// Package console is agentkernel's web console: pages to watch and steer
// sessions, sandboxes and durable objects as they live, served by the
// daemon at /console.
//
// The console is a client of the public API, in process: every page reads
// what it shows through the same routes an SDK calls, with the API key the
// user logged in with, so tenant scoping, forwarding in a cluster and every
// check stay in one place (internal/api). Pages are Go templates rendered
// on the server; a small script (static/console.js) follows live streams
// and sends actions. Everything is embedded in the binary: nothing is
// fetched from the network, at run time or at test time.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/api"
	"github.com/agentkernel/agentkernel/internal/auth"
	"github.com/agentkernel/agentkernel/internal/model"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is served.
const Prefix = "/console"

// cookieName holds the API key the user logged in with: HttpOnly (no
// script reads it), SameSite=Strict (no other site's page sends it) and
// scoped to the console's paths.
const cookieName = "agentkernel_console"

// csp is the Content-Security-Policy of every console answer: scripts,
// styles and connections only from the console itself; no inline script,
// no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Authenticator checks an API key's secret (api.Server implements it).
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (api.Principal, error)
}

// Options configure the console.
type Options struct {
	// API serves the public API (the api.Server): the console reads and
	// acts through it.
	API http.Handler
	// Auth checks the key a user logs in with.
	Auth Authenticator
	Log  *slog.Logger
	// Version is shown in the footer.
	Version string
	// Price is a model's price by its id, false when it has none (the
	// daemon's [prices] over the built-in list); nil prices nothing. A
	// session's cost is shown with it.
	Price func(modelID string) (model.Price, bool)
}

// Console is the web console's handler.
type Console struct {
	o     Options
	mux   *http.ServeMux
	pages map[string]*template.Template
	nav   []navItem
}

// New builds the console.
func New(o Options) (*Console, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	c := &Console{o: o, mux: http.NewServeMux()}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", staticFiles(http.FileServerFS(static))))
	c.mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	c.mux.HandleFunc("POST "+Prefix+"/login", c.login)
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.authed(c.logout))
	c.mux.HandleFunc("GET "+Prefix+"/{$}", c.authed(func(w http.ResponseWriter, r *http.Request, u *user) {
		http.Redirect(w, r, Prefix+"/sessions", http.StatusSeeOther)
	}))
	c.mux.HandleFunc("GET "+Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
	})
	// Each section registers its routes and its navigation entry.
	c.registerSessions()
	c.registerAgents()
	c.registerSandboxes()
	c.registerObjects()
	c.registerTasks()
	c.registerAdmin()
	c.mux.HandleFunc(Prefix+"/", c.authed(func(w http.ResponseWriter, r *http.Request, u *user) {
		c.fail(w, r, u, http.StatusNotFound, "No such page.")
	}))
	return c, nil
}

// ServeHTTP serves the console with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// staticFiles lets the embedded assets be cached (they change only with
// the binary, whose version is in their URLs).
func staticFiles(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// sameOrigin says a state-changing request comes from a console page:
// browsers send Sec-Fetch-Site, or at least Origin, with every POST.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return true
	case "":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// user is who is logged in: the key's secret (sent on to the API) and
// what it may do.
type user struct {
	secret    string
	Principal api.Principal
	csrf      string
}

// authed runs h for a logged-in user; anyone else goes to the login page.
// A POST must carry the user's CSRF token (a form field or the
// X-CSRF-Token header).
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u := c.currentUser(r)
		if u == nil {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in again", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			tok := r.Header.Get("X-CSRF-Token")
			if tok == "" {
				tok = r.PostFormValue("csrf")
			}
			if subtle.ConstantTimeCompare([]byte(tok), []byte(u.csrf)) != 1 {
				http.Error(w, "the form is stale or came from elsewhere (CSRF token mismatch); reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r, u)
	}
}

// currentUser is the logged-in user of the request, nil when its cookie
// is missing or names a key that is no longer valid.
func (c *Console) currentUser(r *http.Request) *user {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	p, err := c.o.Auth.Authenticate(r.Context(), ck.Value)
	if err != nil || p.EnvironmentID != "" {
		return nil
	}
	return &user{secret: ck.Value, Principal: p, csrf: csrfToken(ck.Value)}
}

// csrfToken is derived from the key: the same on every node of a cluster
// and across restarts, and unknown to anyone who does not hold the key.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(auth.Hash(secret)))
	m.Write([]byte("agentkernel console csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, nil, http.StatusOK, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	secret := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	p, err := c.o.Auth.Authenticate(r.Context(), secret)
	switch {
	case errors.Is(err, api.ErrInvalidKey):
		c.render(w, r, nil, http.StatusUnauthorized, "login", map[string]any{"Next": next, "Error": "That key is not valid (unknown or revoked)."})
		return
	case err != nil:
		c.o.Log.WarnContext(r.Context(), "console: login", "err", err)
		c.render(w, r, nil, http.StatusServiceUnavailable, "login", map[string]any{"Next": next, "Error": "The key could not be checked; try again."})
		return
	case p.EnvironmentID != "":
		c.render(w, r, nil, http.StatusForbidden, "login", map[string]any{"Next": next, "Error": "That is an environment key, for a worker; log in with a tenant key."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: secret, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int((12 * time.Hour).Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, u *user) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// safeNext keeps a redirect after login inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "/sessions"
	}
	return next
}
