// Package safetar is agentkernel's one tar extractor for archives it did not
// write itself or must not trust: process-driver images, workspace backups
// and durable-object bundles all unpack through Extract.
//
// Every path is resolved through an os.Root on the target directory, so no
// entry — nor a symlink an earlier entry planted — can put anything outside
// it. Absolute paths and ".." are refused rather than rewritten (such an
// archive was not made for this). What else an archive may hold — which
// links, device nodes, repeated paths, how large — differs per caller and
// is said in Options, so the rules live in one place with one test suite.
package safetar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io/fs"
)

// Links says which links an archive may hold.
type Links int

const (
	// Refuse fails the extraction at the first link entry.
	Refuse Links = iota
	// Inside accepts a link only when it stays inside the target: a hard
	// link must name an earlier entry; a symlink's target must be relative
	// and, followed through the extracted tree, resolve inside it.
	Inside
	// AsData writes a symlink as it is, whatever it points at (absolute
	// targets are normal in a root filesystem and resolve inside the
	// sandbox); the extractor never follows it out. Symlinks only.
	AsData
)

// Options say what an archive may hold and how it lands.
type Options struct {
	// Target names the directory in errors: "image", "workspace", "bundle".
	Target string
	// Symlinks and Hardlinks say which links are accepted (default Refuse).
	Symlinks  Links
	Hardlinks Links
	// Sparse accepts GNU sparse files (written out expanded).
	Sparse bool
	// SkipSpecial leaves device nodes and FIFOs out, counting them in
	// Stats.Skipped; otherwise they fail the extraction.
	SkipSpecial bool
	// Overwrite lets a later entry replace an earlier one with the same
	// path, as tar(1) does; otherwise a repeated path fails (a directory
	// may repeat).
	Overwrite bool
	// SkipRoot ignores an entry naming the target itself ("./"), whose
	// mode and owner the caller decides; otherwise it fails.
	SkipRoot bool
	// Chown applies the entries' uid and gid (only root can).
	Chown bool
	// Mode gives the mode an entry gets; nil keeps the permission bits and
	// the sticky bit and drops setuid and setgid (ModeDropSetID).
	Mode func(hdr *tar.Header) fs.FileMode
	// MaxBytes bounds the total size of the regular files and MaxEntries
	// the number of entries; 0 means no limit. Going over is a *LimitError,
	// found before the entry over the limit is written.
	MaxBytes   int64
	MaxEntries int64
}

// Stats counts what an archive held.
type Stats struct {
	Files    int64 // regular files; a hard link counts as a file
	Dirs     int64
	Symlinks int64
	Bytes    int64 // regular file content
	// Skipped counts entries left out (device nodes and FIFOs with
	// SkipSpecial).
	Skipped int64
}

// Sentinel errors; the typed errors below wrap them.
var (
	// ErrUnsafeEntry: an entry would land outside the target or is of a
	// kind the caller does not accept.
	ErrUnsafeEntry = errors.New("unsafe tar entry")
	// ErrMalformed: the stream is not a readable tar archive (or its
	// compression is corrupt).
	ErrMalformed = errors.New("malformed archive")
	// ErrLimit: the archive is over Options.MaxBytes or MaxEntries.
	ErrLimit = errors.New("archive over a limit")
)

// EntryError says which entry was refused and why. It unwraps to
// ErrUnsafeEntry.
type EntryError struct {
	Name   string
	Reason string
}

func (e *EntryError) Error() string { return fmt.Sprintf("unsafe tar entry %q: %s", e.Name, e.Reason) }

func (e *EntryError) Unwrap() error { return ErrUnsafeEntry }

// LimitError says which limit an archive went over. It unwraps to
// ErrLimit.
type LimitError struct {
	// Entries is set for MaxEntries, clear for MaxBytes.
	Entries bool
	Max     int64
	// Got is the count or size the archive reached when it was stopped.
	Got int64
}

func (e *LimitError) Error() string {
	if e.Entries {
		return fmt.Sprintf("the archive has more than %d entries", e.Max)
	}
	return fmt.Sprintf("the archive's files add up to more than %d bytes (%d so far)", e.Max, e.Got)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// ModeDropSetID is the default Mode: permission bits and sticky, without
// setuid and setgid. Sandboxes run with no_new_privs, so the bits are
// useless inside; on the host they would hand any local user who reaches
// the directory a setuid binary from an untrusted archive.
func ModeDropSetID(hdr *tar.Header) fs.FileMode {
	out := fs.FileMode(hdr.Mode).Perm()
	if hdr.Mode&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

// ModeKeepSetID keeps setuid, setgid and sticky as well as the permission
// bits (a workspace restored as it was archived).
func ModeKeepSetID(hdr *tar.Header) fs.FileMode {
	out := ModeDropSetID(hdr)
	if hdr.Mode&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if hdr.Mode&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	return out
}

// ModeReadOnlyTree ignores the archive's modes: directories 0755, files
// 0755 when any execute bit is set and 0644 otherwise, so whatever user a
// sandbox runs as can read the tree and nobody but its owner can change it.
func ModeReadOnlyTree(hdr *tar.Header) fs.FileMode {
	if hdr.Typeflag == tar.TypeDir || hdr.Mode&0o111 != 0 {
		return 0o755
	}
	return 0o644
}
