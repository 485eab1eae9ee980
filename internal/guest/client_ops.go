package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Exec runs a command and waits for it. onOutput (may be nil) receives
// output chunks in the order the guest read them. Cancelling ctx kills the
// command's process group in the sandbox.
func (c *Client) Exec(ctx context.Context, req ExecRequest, onOutput func(stream string, data []byte)) (*ExecResult, error) {
	resp, err := c.do(ctx, http.MethodPost, "/exec", nil, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var f ExecFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, fmt.Errorf("guest exec: bad frame: %w", err)
		}
		switch {
		case f.Error != "":
			return nil, fmt.Errorf("guest exec: %s", f.Error)
		case f.ExitCode != nil:
			// Read to the end of the body (the last frame is the last
			// line), so the connection goes back to the pool instead of
			// costing the next call a new one and its handshake.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return &ExecResult{ExitCode: *f.ExitCode, DurationMS: f.DurationMS, TimedOut: f.TimedOut}, nil
		case onOutput != nil:
			onOutput(f.Stream, f.Data)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("guest exec: %w", err)
	}
	return nil, fmt.Errorf("guest exec: %w", io.ErrUnexpectedEOF)
}

// ExecOutput runs a command and collects its output.
func (c *Client) ExecOutput(ctx context.Context, req ExecRequest) (stdout, stderr []byte, res *ExecResult, err error) {
	var out, errb bytes.Buffer
	res, err = c.Exec(ctx, req, func(stream string, data []byte) {
		if stream == "stderr" {
			errb.Write(data)
		} else {
			out.Write(data)
		}
	})
	return out.Bytes(), errb.Bytes(), res, err
}

// StartProcess starts a background process.
func (c *Client) StartProcess(ctx context.Context, req ExecRequest) (*ProcessInfo, error) {
	var info ProcessInfo
	if err := c.call(ctx, http.MethodPost, "/processes", nil, req, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ListProcesses lists background processes, running and exited.
func (c *Client) ListProcesses(ctx context.Context) ([]ProcessInfo, error) {
	var out []ProcessInfo
	err := c.call(ctx, http.MethodGet, "/processes", nil, nil, &out)
	return out, err
}

// Process returns one background process's status.
func (c *Client) Process(ctx context.Context, id string) (*ProcessInfo, error) {
	var info ProcessInfo
	if err := c.call(ctx, http.MethodGet, "/processes/"+url.PathEscape(id), nil, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ProcessOutput reads captured output from an offset.
func (c *Client) ProcessOutput(ctx context.Context, req OutputRequest) (*OutputChunk, error) {
	q := url.Values{"offset": {strconv.FormatInt(req.Offset, 10)}}
	if req.Stream != "" {
		q.Set("stream", req.Stream)
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.FormatInt(req.Limit, 10))
	}
	var chunk OutputChunk
	if err := c.call(ctx, http.MethodGet, "/processes/"+url.PathEscape(req.ID)+"/output", q, nil, &chunk); err != nil {
		return nil, err
	}
	return &chunk, nil
}

// KillProcess signals a background process's group (0 = SIGKILL, which
// also waits for it to be gone).
func (c *Client) KillProcess(ctx context.Context, id string, signal int) (*ProcessInfo, error) {
	var info ProcessInfo
	if err := c.call(ctx, http.MethodPost, "/processes/"+url.PathEscape(id)+"/kill", nil, KillRequest{Signal: signal}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ReadFileMax reads a regular file of at most max bytes. The guest refuses
// a larger file (413 too_large), and the client stops reading after max
// bytes whatever the guest sends, so a file that grows, or a guest that
// misbehaves, cannot make the daemon hold more than max bytes.
func (c *Client) ReadFileMax(ctx context.Context, path string, max int64) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, "/files/content", url.Values{"path": {path}, "max": {strconv.FormatInt(max, 10)}}, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err == nil && int64(len(b)) > max {
		err = &Error{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Message: fmt.Sprintf("%s: file is larger than %d bytes", path, max)}
	}
	return b, err
}

// WriteFile writes a file atomically, creating parents.
func (c *Client) WriteFile(ctx context.Context, req WriteFileRequest) error {
	mode := req.Mode
	if mode == 0 {
		mode = 0o644
	}
	q := url.Values{"path": {req.Path}, "mode": {strconv.FormatUint(uint64(mode), 8)}}
	return c.call(ctx, http.MethodPut, "/files/content", q, bytes.NewReader(req.Data), nil)
}

// ListDir lists a directory.
func (c *Client) ListDir(ctx context.Context, path string) ([]FileInfo, error) {
	var out []FileInfo
	err := c.call(ctx, http.MethodGet, "/files/list", url.Values{"path": {path}}, nil, &out)
	return out, err
}

// Stat describes a file without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (*FileInfo, error) {
	var fi FileInfo
	if err := c.call(ctx, http.MethodGet, "/files/stat", url.Values{"path": {path}}, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// Mkdir creates a directory and its parents.
func (c *Client) Mkdir(ctx context.Context, req MkdirRequest) error {
	return c.call(ctx, http.MethodPost, "/files/mkdir", nil, req, nil)
}

// Remove removes a file or directory; a missing path is not an error.
func (c *Client) Remove(ctx context.Context, req RemoveRequest) error {
	return c.call(ctx, http.MethodPost, "/files/remove", nil, req, nil)
}

// IsNotFound reports whether err is a guest "not found".
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == codeNotFound
}

// Assign gives a pooled sandbox to its sandbox: env is the sandbox's
// environment for every command from now on (see AssignRequest). A
// guest that was assigned before answers 409.
func (c *Client) Assign(ctx context.Context, env map[string]string) error {
	return c.call(ctx, http.MethodPost, "/assign", nil, AssignRequest{Env: env}, nil)
}
