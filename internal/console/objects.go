package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel"
)

// Durable objects: classes and objects, an object's storage, alarms and
// audit records, and the audit log.

func (c *Console) registerObjects() {
	c.addNav(navItem{Label: "Objects", Path: Prefix + "/objects"})
	c.mux.HandleFunc("GET "+Prefix+"/objects", c.authed(c.objectList))
	c.mux.HandleFunc("GET "+Prefix+"/objects/{class}/{id}", c.authed(c.objectPage))
	c.addNav(navItem{Label: "Audit", Path: Prefix + "/audit"})
	c.mux.HandleFunc("GET "+Prefix+"/audit", c.authed(c.auditLog))
}

// objectJSON is the API's object, as the SDK reads it.
type objectJSON = agentkernel.Object

// auditRecord is the API's audit record, as the SDK reads it.
type auditRecord = agentkernel.AuditRecord

// storageEntry is a key of an object's storage with its value, pretty.
type storageEntry struct {
	Key, Value string
	Fold       bool
	// Size is the value's size as stored (compact JSON).
	Size int
}

// Head is the folded view of a long value: its first lines.
func (e storageEntry) Head() string {
	return eventView{Text: e.Value}.FirstLines()
}

// objectsPerPage is how many objects the list shows at a time.
var objectsPerPage = 100

func (c *Console) objectList(w http.ResponseWriter, r *http.Request, u *user) {
	in := r.URL.Query()
	q := url.Values{"limit": {strconv.Itoa(objectsPerPage)}}
	class := strings.TrimSpace(in.Get("class"))
	if class != "" {
		q.Set("class", class)
	}
	status := in.Get("status")
	if status == "Active" || status == "Hibernating" {
		q.Set("status", status)
	} else {
		status = ""
	}
	if a := in.Get("after"); a != "" {
		q.Set("after", a)
	}
	var classes struct {
		Data []struct {
			Class       string `json:"class"`
			Source      string `json:"source"`
			StorageMode string `json:"storage_mode"`
			Isolation   string `json:"isolation"`
			Driver      string `json:"driver"`
		} `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/objects/definitions", nil, nil, &classes); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var objs struct {
		Data    []objectJSON `json:"data"`
		HasMore bool         `json:"has_more"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/objects", q, nil, &objs); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	// The API's cursor is the last object's "class/id" (objects are listed
	// by class, then id).
	cursor := ""
	if objs.HasMore && len(objs.Data) > 0 {
		last := objs.Data[len(objs.Data)-1]
		cursor = last.Class + "/" + last.ID
	}
	next := nextPage("/objects", q, []string{"class", "status"}, "after", cursor)
	c.render(w, r, u, http.StatusOK, "objects", map[string]any{
		"Classes": classes.Data, "Objects": objs.Data, "Class": class, "Status": status, "Next": next,
	})
}

func (c *Console) objectPage(w http.ResponseWriter, r *http.Request, u *user) {
	class, id := r.PathValue("class"), r.PathValue("id")
	base := "/v1/objects/" + url.PathEscape(class) + "/" + url.PathEscape(id)
	var o objectJSON
	if err := c.call(r.Context(), u, http.MethodGet, base, nil, nil, &o); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var storage []storageEntry
	for k, v := range o.Storage {
		p := pretty(v)
		storage = append(storage, storageEntry{Key: k, Value: p, Fold: strings.Count(p, "\n") >= foldOver || len(p) > 4096, Size: len(v)})
	}
	slices.SortFunc(storage, func(a, b storageEntry) int { return strings.Compare(a.Key, b.Key) })
	var alarms struct {
		Data []agentkernel.Alarm `json:"data"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, base+"/alarms", nil, nil, &alarms); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	var audit struct {
		Data    []auditRecord `json:"data"`
		HasMore bool          `json:"has_more"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/audit", url.Values{"subject": {class + "/" + id}, "limit": {"50"}}, nil, &audit); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	c.render(w, r, u, http.StatusOK, "object", map[string]any{"Object": o, "Storage": storage, "Alarms": alarms.Data,
		"Audit": audit.Data, "MoreAudit": audit.HasMore})
}

func (c *Console) auditLog(w http.ResponseWriter, r *http.Request, u *user) {
	in := r.URL.Query()
	q := url.Values{"limit": {"100"}}
	for _, k := range []string{"kind", "subject", "after"} {
		if v := strings.TrimSpace(in.Get(k)); v != "" {
			q.Set(k, v)
		}
	}
	var audit struct {
		Data    []auditRecord `json:"data"`
		HasMore bool          `json:"has_more"`
	}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/audit", q, nil, &audit); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	cursor := ""
	if audit.HasMore && len(audit.Data) > 0 {
		cursor = audit.Data[len(audit.Data)-1].ID
	}
	next := nextPage("/audit", q, []string{"kind", "subject"}, "after", cursor)
	c.render(w, r, u, http.StatusOK, "audit", map[string]any{"Records": audit.Data, "Kind": q.Get("kind"), "Subject": q.Get("subject"), "Next": next})
}
