package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// pageJSON is the SDK's cursor page (pagination.PageCursor and, with
// prev_page, BidirectionalPageCursor). next_page is null on the last page.
type pageJSON[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
	PrevPage *string `json:"prev_page,omitempty"`
}

// Cursors are opaque to clients; inside, a kind letter and a position
// (a resource id or an event Seq) after which the next page starts.
const cursorPrefix = "page_"

func encodeCursor(pos string) *string {
	c := cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(pos))
	return &c
}

// pageQuery is what every list endpoint reads from the query string.
type pageQuery struct {
	limit  int
	cursor string // decoded position; "" on the first page
	desc   bool
	// created_at[gt|gte|lt|lte] filters; zero when absent.
	gt, gte, lt, lte time.Time
}

func parsePageQuery(q url.Values, defLimit, maxLimit int, defDesc bool) (pageQuery, error) {
	p := pageQuery{limit: defLimit, desc: defDesc}
	limit, err := queryLimit(q, defLimit, maxLimit)
	if err != nil {
		return p, err
	}
	p.limit = limit
	if v := q.Get("page"); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(v, cursorPrefix))
		if err != nil || !strings.HasPrefix(v, cursorPrefix) || len(raw) == 0 {
			return p, BadRequest("query parameter \"page\" is not a cursor from this server; pass next_page from the previous response")
		}
		p.cursor = string(raw)
	}
	switch q.Get("order") {
	case "":
	case "asc":
		p.desc = false
	case "desc":
		p.desc = true
	default:
		return p, BadRequest("query parameter \"order\" must be asc or desc")
	}
	for name, dst := range map[string]*time.Time{"created_at[gt]": &p.gt, "created_at[gte]": &p.gte, "created_at[lt]": &p.lt, "created_at[lte]": &p.lte} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return p, BadRequest("query parameter %q must be an RFC 3339 timestamp", name)
			}
			*dst = t
		}
	}
	return p, nil
}

// inTime applies the created_at filters.
func (p pageQuery) inTime(t time.Time) bool {
	return (p.gt.IsZero() || t.After(p.gt)) && (p.gte.IsZero() || !t.Before(p.gte)) &&
		(p.lt.IsZero() || t.Before(p.lt)) && (p.lte.IsZero() || !t.After(p.lte))
}

// queryList reads a repeated query parameter in either form the SDK and
// curl users send: name[]=a&name[]=b or name=a&name=b.
func queryList(q url.Values, name string) []string {
	return append(q[name+"[]"], q[name]...)
}

// queryBool reads a boolean query parameter.
func queryBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, BadRequest("query parameter %q must be true or false", name)
	}
	return b, nil
}

// collectPage fills one page of at most limit items that pass keep, reading
// batches from fetch (which continues after the given position) until the
// page is full or the source ends. more reports whether items remain.
func collectPage[T any](limit int, start string, fetch func(after string, n int) ([]T, error), pos func(T) string, keep func(T) bool) (page []T, more bool, err error) {
	after := start
	batch := limit + 1
	for {
		items, err := fetch(after, batch)
		if err != nil {
			return nil, false, err
		}
		for _, it := range items {
			if !keep(it) {
				continue
			}
			if len(page) == limit {
				return page, true, nil
			}
			page = append(page, it)
		}
		if len(items) < batch {
			return page, false, nil
		}
		after = pos(items[len(items)-1])
	}
}

// writePage writes a page with next_page set when more remain.
func writePage[T any](w http.ResponseWriter, data []T, more bool, last func(T) string) {
	out := pageJSON[T]{Data: data}
	if out.Data == nil {
		out.Data = []T{}
	}
	if more && len(data) > 0 {
		out.NextPage = encodeCursor(last(data[len(data)-1]))
	}
	writeJSON(w, http.StatusOK, out)
}
