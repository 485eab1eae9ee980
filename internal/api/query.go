package api

import (
	"net/url"
	"strconv"
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
