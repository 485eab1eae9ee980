package blob

// Pinner keeps the blob garbage collector away from a key while the row
// that will reference it is not written yet. A writer pins the key before
// its Put and unpins it once the referencing row is committed or the blob
// deleted: between those two moments the blob exists and no row holds it,
// which is exactly what the collector deletes.
type Pinner interface {
	// Pin returns the function that removes this pin. It waits while the
	// collector is deciding about key, so a pin never races a delete.
	Pin(key string) (unpin func())
}

// NoPins is the Pinner of a writer that runs without a collector (tests,
// tools): there is nothing to keep away.
type NoPins struct{}

// Pin does nothing.
func (NoPins) Pin(string) func() { return func() {} }
