package safetar

import "os"

// The three kinds of archive agentkernel extracts. Their rules are kept
// here, beside the extractor, so one test suite covers every caller.

// Rootfs is for a process-driver image: symlinks are data (absolute ones
// are normal in a root filesystem and resolve inside the sandbox), hard
// links stay inside, a sandbox gets its own /dev so device nodes are left
// out, a later entry replaces an earlier one as with tar itself, and
// setuid/setgid are dropped. The caller sets the root's mode.
func Rootfs() Options {
	return Options{
		Target:      "image",
		Symlinks:    AsData,
		Hardlinks:   Inside,
		Sparse:      true,
		SkipSpecial: true,
		Overwrite:   true,
		SkipRoot:    true,
		Chown:       os.Geteuid() == 0,
	}
}

// Workspace is for a workspace backup, which snapshot.Write made: symlinks
// are data (a workspace may hold links to anywhere; they resolve inside the
// sandbox), modes are kept as archived, and what Write never writes — hard
// links, device nodes, FIFOs, repeated paths, the root itself — is refused.
// A name with a backslash is an ordinary name (Linux allows it).
func Workspace() Options {
	return Options{
		Target:   "workspace",
		Symlinks: AsData,
		Chown:    os.Geteuid() == 0,
		Mode:     ModeKeepSetID,
	}
}

// Bundle is for a durable object's app, uploaded by a tenant and mounted
// read-only at /app: links only inside the bundle, no device nodes or
// FIFOs, no repeated paths, files owned by the daemon and readable by any
// sandbox user (ModeReadOnlyTree), and the size and entry limits given.
func Bundle(maxBytes, maxEntries int64) Options {
	return Options{
		Target:     "bundle",
		Symlinks:   Inside,
		Hardlinks:  Inside,
		SkipRoot:   true,
		Mode:       ModeReadOnlyTree,
		MaxBytes:   maxBytes,
		MaxEntries: maxEntries,
	}
}
