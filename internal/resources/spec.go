package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Kinds of resources, as the SDK names them.
const (
	KindFile        = "file"
	KindGitHub      = "github_repository"
	KindMemoryStore = "memory_store"
)

// Spec is one resource as a request sends it (the SDK's
// BetaManagedAgentsFileResourceParams, …GitHubRepositoryResourceParams,
// …MemoryStoreResourceParam). The API decodes it; the service checks it.
type Spec struct {
	Type      string
	MountPath string // "" = the kind's default
	// file
	FileID string
	// github_repository
	URL          string
	CheckoutType string // "", branch or commit
	CheckoutName string
	CheckoutSHA  string
	Token        string
	// memory_store
	MemoryStoreID string
	Access        string // "", read_write or read_only
	Instructions  string
}

// InputError is bad input: Status (400, 404, 409) and the field it names.
type InputError struct {
	Status int
	Field  string
	Msg    string
}

func (e *InputError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Msg) }

func bad(field, format string, args ...any) error {
	return &InputError{Status: http.StatusBadRequest, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits of a session's resources.
const (
	MaxResources      = 64
	maxMountPath      = 1024
	maxInstructions   = 4096
	maxURL            = 2048
	maxToken          = 4096
	defaultUploadsDir = "/mnt/session/uploads"
	OutputsPath       = "/mnt/session/outputs"
	MemoryRoot        = "/mnt/memory"
	linksDir          = "/mnt/.links"
	stagingDir        = "/mnt/.staging"
	defaultWorkspace  = "/workspace"
	mntRoot           = "/mnt"
	accessReadWrite   = "read_write"
	accessReadOnly    = "read_only"
	checkoutBranch    = "branch"
	checkoutCommit    = "commit"
)

// reserved are paths no resource may be mounted at or under: the kernel's
// and the guest's own, and the session's outputs and memory mounts.
var reserved = []string{"/proc", "/dev", "/sys", "/run", "/.agentkernel", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/usr",
	OutputsPath, linksDir, stagingDir}

var (
	shaRE       = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
	repoNameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	storeNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// checkMountPath refuses a path that is not absolute and clean, climbs
// with "..", or lands in a reserved place.
func checkMountPath(field, p string) error {
	switch {
	case p == "":
		return bad(field, "must not be empty; leave it out for the default")
	case len(p) > maxMountPath:
		return bad(field, "is %d bytes; the limit is %d", len(p), maxMountPath)
	case !strings.HasPrefix(p, "/"):
		return bad(field, "%q must be an absolute path", p)
	case strings.ContainsAny(p, "\x00\n\r"):
		return bad(field, "must not contain NUL or line breaks")
	case p == "/" || p == mntRoot || p == defaultWorkspace:
		return bad(field, "%q is a directory the sandbox itself needs; mount below it", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." || el == "." {
			return bad(field, "%q must not contain %q", p, el)
		}
	}
	if path.Clean(p) != p {
		return bad(field, "%q is not clean; send %q", p, path.Clean(p))
	}
	for _, r := range reserved {
		if under(p, r) {
			return bad(field, "%q is under %s, which no resource may be mounted at", p, r)
		}
	}
	if under(p, MemoryRoot) {
		return bad(field, "%q is under %s, where memory stores are mounted by name", p, MemoryRoot)
	}
	for _, d := range []string{OutputsPath, defaultUploadsDir, linksDir, stagingDir, MemoryRoot} {
		if under(d, p) {
			return bad(field, "%q holds %s, a directory the daemon makes; mount below it", p, d)
		}
	}
	return nil
}

// under reports whether p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// overlaps reports whether one of a and b is the other or below it.
func overlaps(a, b string) bool { return under(a, b) || under(b, a) }

// repoName is the last element of a repository URL without ".git".
func repoName(u *url.URL) string {
	name := strings.TrimSuffix(path.Base(strings.TrimSuffix(u.Path, "/")), ".git")
	if !repoNameRE.MatchString(name) || name == "." || name == ".." {
		return ""
	}
	return name
}

// checkBranch refuses a branch name git would read as an option or
// refuse itself (git check-ref-format's rules, shortened).
func checkBranch(field, b string) error {
	switch {
	case b == "":
		return bad(field, "must not be empty")
	case len(b) > 255:
		return bad(field, "is %d bytes; the limit is 255", len(b))
	case strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, "."):
		return bad(field, "%q is not a valid branch name", b)
	case strings.Contains(b, "..") || strings.Contains(b, "@{") || strings.Contains(b, "//"):
		return bad(field, "%q is not a valid branch name", b)
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return bad(field, "%q is not a valid branch name (character %q)", b, c)
		}
	}
	return nil
}

// repoDoc is what a github_repository resource shows.
type repoDoc struct {
	URL      string          `json:"url"`
	Checkout json.RawMessage `json:"checkout"`
}

// fileDoc is what a file resource shows.
type fileDoc struct {
	FileID string `json:"file_id"`
}

// memoryDoc is what a memory_store resource shows.
type memoryDoc struct {
	MemoryStoreID string  `json:"memory_store_id"`
	Access        string  `json:"access"`
	Name          string  `json:"name"`
	Description   string  `json:"description"`
	Instructions  *string `json:"instructions"`
}

// build checks one spec (field is its place in the request, e.g.
// "resources[1]") and makes its row, the token sealed.
func (s *Service) build(ctx context.Context, tenantID, sessionID, field string, sp Spec) (*store.SessionResource, error) {
	r := &store.SessionResource{TenantID: tenantID, SessionID: sessionID, Kind: sp.Type}
	// A kind this daemon cannot run is refused before anything else is
	// read, so the message says what is missing, not what else is wrong.
	switch {
	case sp.Type == KindFile && s.files() == nil:
		return nil, bad(field+".type", "file resources are not supported yet: this daemon runs without the Files API")
	case sp.Type == KindMemoryStore && s.memory() == nil:
		return nil, bad(field+".type", "memory_store resources are not supported yet: this daemon runs without memory stores")
	}
	mp := field + ".mount_path"
	if sp.MountPath != "" {
		if err := checkMountPath(mp, sp.MountPath); err != nil {
			return nil, err
		}
	}
	switch sp.Type {
	case KindFile:
		if sp.FileID == "" {
			return nil, bad(field+".file_id", "is required: the id of a file uploaded with /v1/files")
		}
		if _, err := s.files().Get(ctx, tenantID, sp.FileID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, &InputError{Status: http.StatusNotFound, Field: field + ".file_id", Msg: fmt.Sprintf("file %q not found", sp.FileID)}
			}
			return nil, err
		}
		r.MountPath = sp.MountPath
		if r.MountPath == "" {
			r.MountPath = defaultUploadsDir + "/" + sp.FileID
		}
		r.Doc = mustJSON(fileDoc{FileID: sp.FileID})
	case KindGitHub:
		if sp.URL == "" {
			return nil, bad(field+".url", "is required: the repository's https URL")
		}
		u, err := url.Parse(sp.URL)
		switch {
		case len(sp.URL) > maxURL:
			return nil, bad(field+".url", "is %d bytes; the limit is %d", len(sp.URL), maxURL)
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return nil, bad(field+".url", "%q must be an http(s) URL of a repository without credentials, query or fragment (e.g. https://github.com/owner/repo)", sp.URL)
		}
		name := repoName(u)
		if name == "" {
			return nil, bad(field+".url", "%q names no repository (its last path element must be the repository's name)", sp.URL)
		}
		if len(sp.Token) > maxToken {
			return nil, bad(field+".authorization_token", "is %d bytes; the limit is %d", len(sp.Token), maxToken)
		}
		if strings.ContainsAny(sp.Token, "\x00\r\n") {
			return nil, bad(field+".authorization_token", "must not contain NUL or line breaks")
		}
		var checkout json.RawMessage = json.RawMessage(`null`)
		switch sp.CheckoutType {
		case "":
		case checkoutBranch:
			if err := checkBranch(field+".checkout.name", sp.CheckoutName); err != nil {
				return nil, err
			}
			checkout = mustJSON(map[string]string{"type": checkoutBranch, "name": sp.CheckoutName})
		case checkoutCommit:
			if !shaRE.MatchString(sp.CheckoutSHA) {
				return nil, bad(field+".checkout.sha", "%q must be a full commit SHA (40 or 64 lowercase hex digits)", sp.CheckoutSHA)
			}
			checkout = mustJSON(map[string]string{"type": checkoutCommit, "sha": sp.CheckoutSHA})
		default:
			return nil, bad(field+".checkout.type", "unknown type %q (want branch or commit)", sp.CheckoutType)
		}
		r.MountPath = sp.MountPath
		if r.MountPath == "" {
			r.MountPath = defaultWorkspace + "/" + name
		}
		if under(r.MountPath, mntRoot) {
			return nil, bad(mp, "%q is under /mnt, which is read-only in the sandbox; a repository is a working copy (default /workspace/%s)", r.MountPath, name)
		}
		r.Doc = mustJSON(repoDoc{URL: sp.URL, Checkout: checkout})
	case KindMemoryStore:
		if sp.MountPath != "" {
			return nil, bad(mp, "is output-only for memory stores: they are mounted at %s/<name>", MemoryRoot)
		}
		if sp.MemoryStoreID == "" {
			return nil, bad(field+".memory_store_id", "is required")
		}
		mem := s.memory()
		access := sp.Access
		switch access {
		case "":
			access = accessReadWrite
		case accessReadWrite, accessReadOnly:
		default:
			return nil, bad(field+".access", "unknown access %q (want read_write or read_only)", access)
		}
		if len(sp.Instructions) > maxInstructions {
			return nil, bad(field+".instructions", "is %d bytes; the limit is %d", len(sp.Instructions), maxInstructions)
		}
		info, err := mem.GetStore(ctx, tenantID, sp.MemoryStoreID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &InputError{Status: http.StatusNotFound, Field: field + ".memory_store_id", Msg: fmt.Sprintf("memory store %q not found", sp.MemoryStoreID)}
		}
		if err != nil {
			return nil, err
		}
		if info.Archived {
			return nil, &InputError{Status: http.StatusConflict, Field: field + ".memory_store_id", Msg: fmt.Sprintf("memory store %q is archived", sp.MemoryStoreID)}
		}
		if !storeNameRE.MatchString(info.Name) || info.Name == "." || info.Name == ".." {
			return nil, bad(field+".memory_store_id", "memory store %q is named %q, which is not a directory name; rename it (letters, digits, '.', '_', '-')", sp.MemoryStoreID, info.Name)
		}
		r.MountPath = MemoryRoot + "/" + info.Name
		var instr *string
		if sp.Instructions != "" {
			instr = &sp.Instructions
		}
		r.Doc = mustJSON(memoryDoc{MemoryStoreID: sp.MemoryStoreID, Access: access, Name: info.Name, Description: info.Description, Instructions: instr})
	default:
		return nil, bad(field+".type", "unknown type %q (want file, github_repository or memory_store)", sp.Type)
	}
	return r, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
