package guest

import "time"

// Wire types shared by the server and the Client. They are the protocol;
// doc.go describes the endpoints that carry them.

// Health is the answer of GET /health.
type Health struct {
	OK       bool  `json:"ok"`
	PID      int   `json:"pid"`
	UptimeMS int64 `json:"uptime_ms"`
}

// ExecRequest runs a command: either Argv (no shell) or Shell (run as
// `sh -c Shell`). Exactly one must be set.
type ExecRequest struct {
	Argv  []string          `json:"argv,omitempty"`
	Shell string            `json:"shell,omitempty"`
	Env   map[string]string `json:"env,omitempty"` // added to the guest's base environment
	Cwd   string            `json:"cwd,omitempty"` // default: the guest's work dir (/workspace)
	// TimeoutMS kills the command's whole process group when it expires;
	// 0 means no timeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// OpID (POST /exec only) makes the exec a journalled op (seed 003):
	// the guest records it durably before starting it, refuses the same id
	// again (409 op_exists with the op's state), lets it run to the end
	// even if the client goes away, and keeps its result for GET
	// /ops/{op_id}. It must match ^op_[0-9a-f]{16,64}$.
	OpID string `json:"op_id,omitempty"`
}

// ExecFrame is one NDJSON line of a POST /exec response. Output frames
// carry Stream and Data; the last frame carries ExitCode (or Error).
type ExecFrame struct {
	Stream     string `json:"stream,omitempty"` // "stdout" or "stderr"
	Data       []byte `json:"data,omitempty"`   // base64 in JSON
	ExitCode   *int   `json:"exit_code,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Error      string `json:"error,omitempty"`
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode   int   `json:"exit_code"`
	DurationMS int64 `json:"duration_ms"`
	TimedOut   bool  `json:"timed_out"`
}

// Op states reported by GET /ops/{op_id}.
const (
	// OpStateUnknown: no record: the op was never accepted, so it never ran.
	OpStateUnknown = "unknown"
	// OpStateRunning: this guest is running it; wait for it to finish.
	OpStateRunning = "running"
	// OpStateFinished: it ended; Result says how.
	OpStateFinished = "finished"
	// OpStateAcceptedGone: accepted, not running in this guest, no result:
	// it died with an earlier guest and may or may not have had its
	// effect. Ambiguous: never re-run it blindly.
	OpStateAcceptedGone = "accepted_gone"
)

// OpStatus is the answer of GET /ops/{op_id}, and the "op" of a 409
// op_exists answer to POST /exec.
type OpStatus struct {
	OpID   string    `json:"op_id"`
	State  string    `json:"state"`
	Result *OpResult `json:"result,omitempty"`
}

// OpResult is how a journalled exec ended, as kept in its result.json.
// Stdout and Stderr keep the first MiB of each stream.
type OpResult struct {
	ExitCode        int       `json:"exit_code"`
	TimedOut        bool      `json:"timed_out"`
	DurationMS      int64     `json:"duration_ms"`
	Stdout          []byte    `json:"stdout"` // base64 in JSON
	Stderr          []byte    `json:"stderr"`
	StdoutTruncated bool      `json:"stdout_truncated"`
	StderrTruncated bool      `json:"stderr_truncated"`
	FinishedAt      time.Time `json:"finished_at"`
	// Tool is the result of a journalled tool call (POST /tools/{name}
	// with an op id); the exec fields are then unset.
	Tool *ToolResult `json:"tool,omitempty"`
}

// ProcessInfo describes a background process.
type ProcessInfo struct {
	ID        string     `json:"id"`
	PID       int        `json:"pid"`
	Argv      []string   `json:"argv"`
	Running   bool       `json:"running"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	TimedOut  bool       `json:"timed_out,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	ExitedAt  *time.Time `json:"exited_at,omitempty"`
}

// OutputRequest reads a background process's captured output from Offset.
type OutputRequest struct {
	ID     string
	Stream string // "stdout" (default) or "stderr"
	Offset int64
	Limit  int64 // default and maximum: MaxOutputChunk
}

// MaxOutputChunk bounds one output read.
const MaxOutputChunk = 1 << 20

// OutputChunk is the answer of GET /processes/{id}/output.
type OutputChunk struct {
	Data       []byte `json:"data"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Size       int64  `json:"size"` // bytes captured so far
	// EOF is true once the process has exited and NextOffset == Size: no
	// more output will ever appear.
	EOF bool `json:"eof"`
}

// KillRequest is the body of POST /processes/{id}/kill; Signal 0 = SIGKILL.
type KillRequest struct {
	Signal int `json:"signal,omitempty"`
}

// FileInfo describes one file.
type FileInfo struct {
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	Mode      uint32    `json:"mode"` // permission bits
	IsDir     bool      `json:"is_dir"`
	IsSymlink bool      `json:"is_symlink,omitempty"`
	ModTime   time.Time `json:"mod_time"`
}

// WriteFileRequest writes Data atomically (temp file + rename).
type WriteFileRequest struct {
	Path string
	Data []byte
	Mode uint32 // default 0644
}

// MkdirRequest creates a directory and its parents.
type MkdirRequest struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode,omitempty"` // default 0755
}

// RemoveRequest removes a file or directory; a non-empty directory needs
// Recursive. Removing a missing path is not an error.
type RemoveRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// errorBody is every non-2xx JSON answer.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Op is the op's state in a 409 op_exists answer.
	Op *OpStatus `json:"op,omitempty"`
}

// Error codes in errorBody.Code.
const (
	codeNotFound   = "not_found"
	codeExists     = "exists"
	codeBadRequest = "bad_request"
	codeNotDir     = "not_dir"
	codeIsDir      = "is_dir"
	codeNotEmpty   = "not_empty"
	codeInternal   = "internal"
	// codeOpExists: an exec's op id was accepted before; the body's "op"
	// has its state.
	codeOpExists = "op_exists"
	// codeEscapesWorkspace: a path in the work dir leads out of it through
	// a symlink; nothing outside was read or written.
	codeEscapesWorkspace = "escapes_workspace"
	// Codes of file errors (errno → code in errorStatus).
	codeReadOnly    = "read_only"        // EROFS (403)
	codePermission  = "permission"       // EACCES, EPERM (403)
	codeNameTooLong = "name_too_long"    // ENAMETOOLONG (400)
	codeSymlinkLoop = "symlink_loop"     // ELOOP (400)
	codeNotRegular  = "not_regular_file" // a pipe, socket or device (400)
	codeBusy        = "busy"             // EBUSY, ETXTBSY (409)
	codeTooLarge    = "too_large"        // EFBIG, over a size limit (413)
	codeNoSpace     = "no_space"         // ENOSPC, EDQUOT (507)
)
