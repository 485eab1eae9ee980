package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// defaultPath is used for children when neither the request nor the guest's
// own environment sets PATH (bwrap starts the guest with a cleared env).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// errBadRequest marks request errors that map to HTTP 400.
var errBadRequest = errors.New("bad request")

// command is a validated ExecRequest ready to start.
type command struct {
	argv []string
	env  []string
	dir  string
}

func (s *Server) command(req ExecRequest) (*command, error) {
	var argv []string
	switch {
	case len(req.Argv) > 0 && req.Shell != "":
		return nil, fmt.Errorf("%w: set argv or shell, not both", errBadRequest)
	case len(req.Argv) > 0:
		argv = req.Argv
	case req.Shell != "":
		argv = []string{"/bin/sh", "-c", req.Shell}
	default:
		return nil, fmt.Errorf("%w: argv or shell is required", errBadRequest)
	}
	dir := s.resolve(req.Cwd)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: cwd %q is not a directory", errBadRequest, dir)
	}
	return &command{argv: argv, env: mergeEnv(s.baseEnv(), req.Env), dir: dir}, nil
}

// start launches c with the given output files in its own process group.
// A missing or non-executable binary is reported as an exit code (127/126)
// with a message, as a shell would, not as an error.
func (s *Server) start(c *command, stdout, stderr *os.File) (ch *child, exitCode int, msg string, err error) {
	path, code, msg := lookPath(c.argv[0], c.dir, c.env)
	if code != 0 {
		return nil, code, msg, nil
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, 0, "", err
	}
	defer devnull.Close()
	attr := &syscall.ProcAttr{
		Dir:   c.dir,
		Env:   c.env,
		Files: []uintptr{devnull.Fd(), stdout.Fd(), stderr.Fd()},
	}
	path, argv := s.wrapArgv(path, c.argv)
	ch, err = s.reaper.spawn(path, argv, attr)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil, 127, fmt.Sprintf("%s: not found\n", c.argv[0]), nil
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC):
		return nil, 126, fmt.Sprintf("%s: permission denied\n", c.argv[0]), nil
	case err != nil:
		return nil, 0, "", fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	return ch, 0, "", nil
}

// lookPath finds name in the child's PATH; names with a slash are used as
// given (relative to dir).
func lookPath(name, dir string, env []string) (string, int, string) {
	if strings.Contains(name, "/") {
		return name, 0, ""
	}
	pathEnv := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	denied := false
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 == 0 {
			denied = true
			continue
		}
		return p, 0, ""
	}
	if denied {
		return "", 126, fmt.Sprintf("%s: permission denied\n", name)
	}
	return "", 127, fmt.Sprintf("%s: command not found\n", name)
}

// mergeEnv overlays extra on base; the result is sorted for determinism.
func mergeEnv(base []string, extra map[string]string) []string {
	m := make(map[string]string, len(base)+len(extra))
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	for k, v := range extra {
		m[k] = v
	}
	if _, ok := m["PATH"]; !ok {
		m["PATH"] = defaultPath
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
