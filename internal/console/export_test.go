package console

import "testing"

// SetObjectsPerPage makes the objects list page n objects at a time for
// the test, so paging is seen without making a hundred objects.
func SetObjectsPerPage(t testing.TB, n int) {
	old := objectsPerPage
	objectsPerPage = n
	t.Cleanup(func() { objectsPerPage = old })
}
