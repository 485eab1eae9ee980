package wsnap

import (
	"context"
	"strings"
	"time"
)

// Report says what one Collect pass did.
type Report struct {
	Manifests, Chunks               int // kept
	DeletedManifests, DeletedChunks int // collected
	DeletedBytes                    int64
}

// Collect deletes what no live snapshot needs: manifests that live does
// not name and that are older than grace (a younger one may be a Write
// whose checkpoint is not committed yet), then chunks no remaining
// manifest lists, older than grace. Writes wait while it runs (they hold
// the lock it takes exclusively), so a chunk a Write chose to reuse is
// never collected under it.
func (s *Store) Collect(ctx context.Context, live map[string]bool, grace time.Duration, now time.Time) (Report, error) {
	s.gc.Lock()
	defer s.gc.Unlock()
	var rep Report
	old := now.Add(-grace)
	marked := map[string]bool{}
	for info, err := range s.blobs.List(ctx, manifestPrefix) {
		if err != nil {
			return rep, err
		}
		id := strings.TrimPrefix(info.Key, manifestPrefix)
		if !live[id] && info.ModTime.Before(old) {
			if err := s.blobs.Delete(ctx, info.Key); err != nil {
				return rep, err
			}
			rep.DeletedManifests++
			rep.DeletedBytes += info.Size
			continue
		}
		m, err := s.manifest(ctx, id)
		if err != nil {
			// An unreadable manifest keeps nothing alive, and is kept for
			// whoever looks into it.
			s.log.WarnContext(ctx, "workspace snapshot unreadable", "snapshot", id, "err", err)
			continue
		}
		rep.Manifests++
		for _, e := range m.Entries {
			for _, c := range e.Chunks {
				marked[c] = true
			}
		}
	}
	for info, err := range s.blobs.List(ctx, chunkPrefix) {
		if err != nil {
			return rep, err
		}
		sum := info.Key[strings.LastIndexByte(info.Key, '/')+1:]
		if marked[sum] || !info.ModTime.Before(old) {
			rep.Chunks++
			continue
		}
		if err := s.blobs.Delete(ctx, info.Key); err != nil {
			return rep, err
		}
		s.mu.Lock()
		delete(s.known, info.Key)
		s.mu.Unlock()
		rep.DeletedChunks++
		rep.DeletedBytes += info.Size
	}
	if rep.DeletedChunks > 0 {
		// What Write remembers of files names chunks: it may name one
		// just deleted. The next Write reads every file again.
		s.mu.Lock()
		s.files = map[string]map[string]fileMemo{}
		s.mu.Unlock()
	}
	return rep, nil
}

// Usage sums the bytes stored for snapshots: manifests and chunks.
func (s *Store) Usage(ctx context.Context) (manifests, chunks int64, err error) {
	for info, err := range s.blobs.List(ctx, manifestPrefix) {
		if err != nil {
			return 0, 0, err
		}
		manifests += info.Size
	}
	for info, err := range s.blobs.List(ctx, chunkPrefix) {
		if err != nil {
			return 0, 0, err
		}
		chunks += info.Size
	}
	return manifests, chunks, nil
}
