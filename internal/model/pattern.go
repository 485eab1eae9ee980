package model

import (
	"sort"
	"strings"
)

// A pattern is a model id, or a prefix ending in "*" ("claude-*"). The
// [models] routes and the [prices] list match ids by the same rule: an
// exact id wins over a prefix, a longer prefix over a shorter one.

// sortPatterns orders items so that the first whose pattern matches an id
// is the best match: exact ids first, then prefixes longest first.
func sortPatterns[T any](items []T, pattern func(T) string) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := pattern(items[i]), pattern(items[j])
		pa, pb := strings.HasSuffix(a, "*"), strings.HasSuffix(b, "*")
		if pa != pb {
			return !pa
		}
		return len(a) > len(b)
	})
}

// matchPattern says whether pattern matches the model id.
func matchPattern(pattern, modelID string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(modelID, p)
	}
	return pattern == modelID
}
