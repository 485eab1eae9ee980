package ids

import (
	"sort"
	"strings"
	"testing"
)

func TestNewIsOrderedAndUnique(t *testing.T) {
	const n = 10000
	got := make([]string, n)
	seen := make(map[string]bool, n)
	for i := range got {
		got[i] = New("x")
		if seen[got[i]] {
			t.Fatalf("duplicate id %s", got[i])
		}
		seen[got[i]] = true
		if !strings.HasPrefix(got[i], "x_") || len(got[i]) != 28 {
			t.Fatalf("bad id %q", got[i])
		}
	}
	if !sort.StringsAreSorted(got) {
		t.Fatal("ids are not in creation order")
	}
}
