package guest

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// proxy forwards /proxy/… to the durable object's server on ProxyTarget
// (127.0.0.1:9333 inside the sandbox), which the daemon cannot reach
// directly: the sandbox has its own network namespace.
func (s *Server) proxy() (http.Handler, error) {
	target, err := url.Parse(s.cfg.ProxyTarget)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("guest: proxy target %q is not a URL", s.cfg.ProxyTarget)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Path = "/" + strings.TrimPrefix(pr.In.URL.Path, "/proxy/")
			pr.Out.URL.RawPath = ""
			pr.SetURL(target)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeJSON(w, http.StatusBadGateway, errorBody{
				Error: fmt.Sprintf("object server at %s: %v", s.cfg.ProxyTarget, err),
				Code:  "unreachable",
			})
		},
	}
	return rp, nil
}
