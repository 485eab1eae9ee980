package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// queryLimit reads ?limit=: def when absent, else an integer from 1 to max,
// with an error naming the parameter and the range.
func queryLimit(q url.Values, def, max int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, BadRequest("query parameter \"limit\" must be an integer from 1 to %d, got %q", max, v)
	}
	return n, nil
}

// checkQuery refuses query parameters the endpoint does not read, so a
// misspelt filter is an error instead of a listing that ignores it. A
// repeated parameter may be sent as name[] too; "beta" is the flag the
// official SDKs add to every Managed Agents request.
func checkQuery(q url.Values, accepted ...string) error {
	for name := range q {
		base := strings.TrimSuffix(name, "[]")
		if base == "beta" || slices.Contains(accepted, base) {
			continue
		}
		if len(accepted) == 0 {
			return BadRequest("unknown query parameter %q: this endpoint takes none", name)
		}
		return BadRequest("unknown query parameter %q (accepted: %s)", name, strings.Join(accepted, ", "))
	}
	return nil
}

// cursorParams are the query parameters parsePageQuery reads.
var cursorParams = []string{"limit", "page", "order", "created_at[gt]", "created_at[gte]", "created_at[lt]", "created_at[lte]"}

// withCursor is cursorParams and more.
func withCursor(more ...string) []string { return append(slices.Clone(cursorParams), more...) }

// noQuery wraps a handler whose endpoint takes no query parameters.
func (s *Server) noQuery(h http.HandlerFunc) http.HandlerFunc { return s.query(h) }

// query wraps a handler whose endpoint reads only the accepted query
// parameters.
func (s *Server) query(h http.HandlerFunc, accepted ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := checkQuery(r.URL.Query(), accepted...); err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r)
	}
}
