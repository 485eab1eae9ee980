package resources

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// placeRepo clones a repository on the host, in a directory of the
// daemon's that the sandbox never sees, and copies it into the sandbox
// through the guest. A copy the sandbox already has (its workspace
// survived hibernation) is kept: it is the agent's working copy now.
// The clone is a journalled outbound call of the session, one per
// sandbox instance (see journalledClone).
func (s *Service) placeRepo(ctx context.Context, c *guest.Client, l layout, sessionID, instance string, r *store.SessionResource) error {
	if _, err := c.Stat(ctx, r.MountPath); err == nil {
		return nil
	} else if !guest.IsNotFound(err) {
		return fmt.Errorf("repository resource %s: stat %s: %w", r.ID, r.MountPath, err)
	}
	var d repoDoc
	if err := jsonInto(r.Doc, &d); err != nil {
		return err
	}
	token, err := s.token(r)
	if err != nil {
		return err
	}
	dir := filepath.Join(l.git(), r.ID)
	if err := os.MkdirAll(l.git(), 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := s.journalledClone(ctx, sessionID, instance, r, d, token, dir); err != nil {
		return fmt.Errorf("repository resource %s (%s): %w", r.ID, d.URL, err)
	}
	// The archive goes where the sandbox can read it but not write it, and
	// the guest unpacks it at the mount path.
	tarName := r.ID + ".tar"
	tarHost := filepath.Join(l.host(stagingDir), tarName)
	if err := tarDir(dir, tarHost); err != nil {
		return fmt.Errorf("repository resource %s: %w", r.ID, err)
	}
	defer os.Remove(tarHost)
	if err := guestSh(ctx, c, `mkdir -p "$1" && tar -xf "$2" -C "$1"`, r.MountPath, stagingDir+"/"+tarName); err != nil {
		return fmt.Errorf("repository resource %s: copy into the sandbox at %s: %w", r.ID, r.MountPath, err)
	}
	return nil
}

// clone runs git with the token in its environment only (GIT_CONFIG_*: not
// in a file, not in the argument list other users of the host can read),
// on http(s) alone, without following redirects (a redirect must not take
// the header to another host).
func (s *Service) clone(ctx context.Context, d repoDoc, token, dir string) error {
	var co struct{ Type, Name, Sha string }
	if len(d.Checkout) > 0 && string(d.Checkout) != "null" {
		if err := json.Unmarshal(d.Checkout, &co); err != nil {
			return err
		}
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		return err
	}
	// Checked at the API too; here again because git's protocol list is
	// built from the scheme below.
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("%q is not an http(s) URL", d.URL)
	}
	pin, err := s.repositoryAddrs(ctx, u)
	if err != nil {
		return err
	}
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + filepath.Dir(dir),
		"PATH=" + os.Getenv("PATH"), "GIT_ASKPASS=/bin/false"}
	cfg := [][2]string{{"protocol.allow", "never"}, {"protocol." + u.Scheme + ".allow", "always"}, {"http.followRedirects", "false"},
		{"core.hooksPath", "/dev/null"}, {"advice.detachedHead", "false"}}
	if pin != "" {
		cfg = append(cfg, [2]string{"http.curloptResolve", pin})
	}
	if token != "" {
		basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		cfg = append(cfg, [2]string{"http.extraHeader", "Authorization: Basic " + basic})
	}
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfg)))
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	git := func(args ...string) error {
		cmd := exec.CommandContext(ctx, s.cfg.Git, args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(out.String())
			if token != "" {
				msg = strings.ReplaceAll(msg, token, "[token]")
			}
			return fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return nil
	}
	args := []string{"clone", "--quiet"}
	switch co.Type {
	case checkoutBranch:
		args = append(args, "--branch", co.Name)
	case checkoutCommit:
		args = append(args, "--no-checkout")
	}
	if err := git(append(args, "--", d.URL, dir)...); err != nil {
		return err
	}
	if co.Type == checkoutCommit {
		if err := git("-C", dir, "checkout", "--quiet", "--detach", co.Sha); err != nil {
			return err
		}
	}
	return nil
}

// tarDir archives dir (never following a symlink in it) to dst.
func tarDir(dir, dst string) error {
	// A tar a crashed daemon left is read-only: remove it, do not reopen it.
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func jsonInto(b json.RawMessage, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("stored resource doc: %w", err)
	}
	return nil
}

// repositoryAddrs checks where a clone of u would connect. The URL comes
// from an API caller, and the daemon — not a sandbox behind the egress
// proxy — does the clone, so it must not become a way into the daemon's
// own networks: a host on loopback, link-local (the cloud metadata
// service) or a private range is refused unless [resources]
// git_internal_hosts names it. The addresses checked are the ones git
// uses: they are pinned with http.curloptResolve (returned as its value,
// "" for an IP literal), so a second DNS answer cannot differ.
func (s *Service) repositoryAddrs(ctx context.Context, u *url.URL) (string, error) {
	host := u.Hostname()
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return "", fmt.Errorf("repository URL %q: bad port", u.Redacted())
		}
		port = n
	}
	allowed := false
	for _, hp := range s.cfg.GitInternalHosts {
		allowed = allowed || hp.Match(strings.ToLower(host), port)
	}
	refuse := func(addr string) error {
		return fmt.Errorf("repository host %s is on the daemon's own network (%s): refused; an operator allows it with [resources] git_internal_hosts", host, addr)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !allowed && egress.InternalAddr(a) {
			return "", refuse(a.String())
		}
		return "", nil
	}
	if !allowed && egress.Internal(host) {
		return "", refuse(host)
	}
	var r interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	} = net.DefaultResolver
	if s.cfg.Resolver != nil {
		r = s.cfg.Resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("repository host %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("repository host %s has no address", host)
	}
	list := make([]string, len(addrs))
	for i, a := range addrs {
		a = a.Unmap()
		if !allowed && egress.InternalAddr(a) {
			return "", refuse(a.String())
		}
		list[i] = a.String()
		if a.Is6() {
			list[i] = "[" + list[i] + "]"
		}
	}
	return fmt.Sprintf("%s:%d:%s", host, port, strings.Join(list, ",")), nil
}
