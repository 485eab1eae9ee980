package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// POST /object/conn hands the daemon a TCP connection to the durable
// object's server, dialed here, inside the sandbox's network namespace
// (ProxyTarget, 127.0.0.1:9333). The guest answers on the raw connection,
// not in HTTP:
//
//	'F' with the connected socket attached (SCM_RIGHTS): the daemon now
//	    holds a connection to the object's server and speaks HTTP/1.1 to it
//	    directly, keeping it for the following calls; the guest is no longer
//	    on the call path.
//	'E' then an errorBody (code "refused" when nothing listens, else
//	    "unreachable"), and the connection closes.
//
// A guest without the route answers "HTTP/1.1 404…", which the daemon
// takes as "use /proxy/ instead" (ObjectClient).
const objectConnPath = "/object/conn"

const (
	objConnFD    = 'F'
	objConnError = 'E'

	codeRefused     = "refused"
	codeUnreachable = "unreachable"

	objectDialTimeout = 5 * time.Second
)

func (s *Server) handleObjectConn(w http.ResponseWriter, r *http.Request) {
	target, err := url.Parse(s.cfg.ProxyTarget)
	if err != nil || target.Host == "" {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: fmt.Sprintf("proxy target %q is not a URL", s.cfg.ProxyTarget), Code: codeInternal})
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "connection cannot be taken over", Code: codeInternal})
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	uc := unixConnOf(conn)
	if uc == nil {
		writeObjConnError(conn, errors.New("the daemon's connection is not a unix socket"), codeInternal)
		return
	}
	_ = conn.SetDeadline(time.Now().Add(objectDialTimeout))
	d := net.Dialer{Timeout: objectDialTimeout}
	oc, err := d.Dial("tcp", target.Host)
	if err != nil {
		code := codeUnreachable
		if errors.Is(err, syscall.ECONNREFUSED) {
			code = codeRefused
		}
		writeObjConnError(conn, fmt.Errorf("object server at %s: %w", s.cfg.ProxyTarget, err), code)
		return
	}
	defer oc.Close() // the daemon holds its own reference once sent
	raw, err := oc.(*net.TCPConn).SyscallConn()
	if err != nil {
		writeObjConnError(conn, err, codeInternal)
		return
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		_, _, serr = uc.WriteMsgUnix([]byte{objConnFD}, syscall.UnixRights(int(fd)), nil)
	}); err != nil {
		serr = err
	}
	if serr != nil {
		s.log.Warn("guest: could not hand the object connection over", "err", serr)
	}
}

func writeObjConnError(conn net.Conn, err error, code string) {
	b, _ := json.Marshal(errorBody{Error: err.Error(), Code: code})
	_, _ = conn.Write(append([]byte{objConnError}, b...))
}

// unixConnOf finds the unix socket under the handshake's wrapper.
func unixConnOf(c net.Conn) *net.UnixConn {
	for {
		switch v := c.(type) {
		case *net.UnixConn:
			return v
		case *authConn:
			c = v.Conn
		default:
			return nil
		}
	}
}
