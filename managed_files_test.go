package agentkernel_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/files"
)

// fileEngines runs fn on a daemon of each store engine: SQLite always,
// PostgreSQL (a fresh database) when AGENTKERNEL_TEST_POSTGRES_URL is set.
func fileEngines(t *testing.T, fn func(t *testing.T, engine daemontest.Option)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, func(*config.Config) {}) })
	t.Run("postgres", func(t *testing.T) {
		u := freshPostgres(t)
		fn(t, func(c *config.Config) { c.Store.Engine, c.Store.URL = "postgres", u })
	})
}

// fileTenant makes a tenant and returns its id and a key of it.
func fileTenant(t testing.TB, d *daemontest.Daemon, name string) (id, key string) {
	t.Helper()
	ctx := context.Background()
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tn, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "files", TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID, k.Secret
}

// fileBlobs counts the blobs under files/: what uploads left on disk.
func fileBlobs(t *testing.T, d *daemontest.Daemon) int {
	t.Helper()
	n := 0
	for _, err := range d.Blobs().List(context.Background(), "files/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func download(t *testing.T, c anthropic.Client, id string, opts ...option.RequestOption) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := c.Beta.Files.Download(context.Background(), id, anthropic.BetaFileDownloadParams{}, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestFilesThroughTheSDK(t *testing.T) {
	fileEngines(t, func(t *testing.T, engine daemontest.Option) {
		ctx := context.Background()
		d := daemontest.Start(t, engine)
		tenantID, key := fileTenant(t, d, "files-a")
		c := sdkClient(d, key)

		// Upload: streamed multipart; the last path component of the name is
		// kept, the MIME type the client sent is recorded.
		data := []byte("hello, files\n")
		up, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(data), "../../etc/notes.txt", "text/plain")})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(up.ID, "file_") || up.Type != "file" || up.Filename != "notes.txt" || up.MimeType != "text/plain" ||
			up.SizeBytes != int64(len(data)) || up.Downloadable || up.CreatedAt.IsZero() || up.JSON.Scope.Valid() && up.Scope.ID != "" {
			t.Fatalf("upload: %s", up.RawJSON())
		}
		row, err := d.Store().GetFile(ctx, tenantID, up.ID)
		sum := sha256.Sum256(data)
		if err != nil || row.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("stored row %+v, %v: want sha256 %x", row, err, sum)
		}
		// The generic type the SDK sends for a plain reader is replaced by
		// the extension's.
		js, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader(`{"a":1}`), "data.json", "")})
		if err != nil || js.MimeType != "application/json" {
			t.Fatalf("upload json: %v %v", js, err)
		}

		meta, err := c.Beta.Files.GetMetadata(ctx, up.ID, anthropic.BetaFileGetMetadataParams{})
		if err != nil || meta.ID != up.ID || meta.Filename != "notes.txt" || meta.SizeBytes != up.SizeBytes || !meta.CreatedAt.Equal(up.CreatedAt) {
			t.Fatalf("metadata: %v %v", meta, err)
		}

		// expires_in_seconds comes after the file part; it still counts.
		exp, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("x"), "e.txt", "text/plain"), ExpiresInSeconds: anthropic.Int(3600)})
		if err != nil || exp.ExpiresAt.Sub(exp.CreatedAt) != time.Hour {
			t.Fatalf("upload with expiry: %v %v", exp, err)
		}
		_, err = c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("x"), "e.txt", "text/plain"), ExpiresInSeconds: anthropic.Int(60)})
		wantStatus(t, "expires_in_seconds below the range", err, 400, "expires_in_seconds", "3600")

		// A file a session produced: downloadable, scoped to the session.
		out := bytes.Repeat([]byte("0123456789"), 1000)
		prod, err := d.Files().Create(ctx, tenantID, files.CreateParams{Filename: "report.csv", MimeType: "text/csv",
			Body: bytes.NewReader(out), ScopeSessionID: "sesn_files1", Downloadable: true})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := c.Beta.Files.GetMetadata(ctx, prod.ID, anthropic.BetaFileGetMetadataParams{})
		if err != nil || !pm.Downloadable || pm.Scope.ID != "sesn_files1" || pm.Scope.Type != "session" {
			t.Fatalf("session file metadata: %s %v", pm.RawJSON(), err)
		}

		// Download: whole, ranged, suffix range, past the end.
		resp, body, err := download(t, c, prod.ID)
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, out) || resp.Header.Get("Content-Type") != "text/csv" ||
			resp.Header.Get("Content-Disposition") != `attachment; filename=report.csv` || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Fatalf("download: %v %v %d bytes %v", resp.StatusCode, resp.Header, len(body), err)
		}
		resp, body, err = download(t, c, prod.ID, option.WithHeader("Range", "bytes=5-14"))
		if err != nil || resp.StatusCode != 206 || string(body) != "5678901234" || resp.Header.Get("Content-Range") != "bytes 5-14/10000" {
			t.Fatalf("ranged download: %v %q %v %v", resp.StatusCode, body, resp.Header, err)
		}
		resp, body, err = download(t, c, prod.ID, option.WithHeader("Range", "bytes=-3"))
		if err != nil || resp.StatusCode != 206 || string(body) != "789" {
			t.Fatalf("suffix range: %v %q %v", resp.StatusCode, body, err)
		}
		_, _, err = download(t, c, prod.ID, option.WithHeader("Range", "bytes=10000-"))
		wantStatus(t, "range past the end", err, 416, "10000-byte file")
		_, _, err = download(t, c, up.ID)
		wantStatus(t, "download of an uploaded file", err, 400, "not downloadable")

		// List: newest first, the SDK's cursor pages, the scope and ids filters.
		page, err := c.Beta.Files.List(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(2)})
		if err != nil || len(page.Data) != 2 || page.NextPage == "" || page.Data[0].ID != prod.ID || page.Data[1].ID != exp.ID {
			t.Fatalf("first page: %s %v", page.RawJSON(), err)
		}
		var all []string
		for f := range c.Beta.Files.ListAutoPaging(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(1)}).All() {
			all = append(all, f.ID)
		}
		if strings.Join(all, ",") != strings.Join([]string{prod.ID, exp.ID, js.ID, up.ID}, ",") {
			t.Fatalf("auto-paging listed %v", all)
		}
		scoped, err := c.Beta.Files.List(ctx, anthropic.BetaFileListParams{ScopeID: anthropic.String("sesn_files1")})
		if err != nil || len(scoped.Data) != 1 || scoped.Data[0].ID != prod.ID || scoped.NextPage != "" {
			t.Fatalf("scope_id: %s %v", scoped.RawJSON(), err)
		}
		byID, err := c.Beta.Files.List(ctx, anthropic.BetaFileListParams{IDs: []string{up.ID, "file_missing", js.ID}})
		if err != nil || len(byID.Data) != 2 || byID.Data[0].ID != js.ID || byID.Data[1].ID != up.ID {
			t.Fatalf("ids: %s %v", byID.RawJSON(), err)
		}
		_, err = c.Beta.Files.List(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(1001)})
		wantStatus(t, "limit above 1000", err, 400, "limit")
		// The hosted API's id cursor: after_id pages to older files.
		var idPage struct {
			Data    []struct{ ID string } `json:"data"`
			HasMore bool                  `json:"has_more"`
			FirstID string                `json:"first_id"`
			LastID  string                `json:"last_id"`
		}
		err = c.Get(ctx, "v1/files?after_id="+exp.ID+"&limit=1", nil, &idPage)
		if err != nil || len(idPage.Data) != 1 || idPage.Data[0].ID != js.ID || !idPage.HasMore || idPage.FirstID != js.ID || idPage.LastID != js.ID {
			t.Fatalf("after_id page: %+v %v", idPage, err)
		}
		err = c.Get(ctx, "v1/files?before_id="+js.ID+"&limit=5", nil, &idPage)
		if err != nil || len(idPage.Data) != 2 || idPage.Data[0].ID != prod.ID || idPage.Data[1].ID != exp.ID || idPage.HasMore {
			t.Fatalf("before_id page: %+v %v", idPage, err)
		}

		// Another tenant sees none of it: every id is a 404, the list is empty.
		_, otherKey := fileTenant(t, d, "files-b")
		o := sdkClient(d, otherKey)
		_, err = o.Beta.Files.GetMetadata(ctx, prod.ID, anthropic.BetaFileGetMetadataParams{})
		wantStatus(t, "another tenant's metadata", err, 404, prod.ID)
		_, _, err = download(t, o, prod.ID)
		wantStatus(t, "another tenant's content", err, 404, prod.ID)
		_, err = o.Beta.Files.Delete(ctx, prod.ID, anthropic.BetaFileDeleteParams{})
		wantStatus(t, "another tenant's delete", err, 404, prod.ID)
		ol, err := o.Beta.Files.List(ctx, anthropic.BetaFileListParams{IDs: []string{prod.ID, up.ID}})
		if err != nil || len(ol.Data) != 0 {
			t.Fatalf("another tenant's list: %s %v", ol.RawJSON(), err)
		}
		_, err = c.Beta.Files.GetMetadata(ctx, "file_doesnotexist", anthropic.BetaFileGetMetadataParams{})
		wantStatus(t, "unknown id", err, 404, "file_doesnotexist")

		// Delete: the row and the blob go.
		before := fileBlobs(t, d)
		del, err := c.Beta.Files.Delete(ctx, up.ID, anthropic.BetaFileDeleteParams{})
		if err != nil || del.ID != up.ID || del.Type != "file_deleted" {
			t.Fatalf("delete: %v %v", del, err)
		}
		_, err = c.Beta.Files.GetMetadata(ctx, up.ID, anthropic.BetaFileGetMetadataParams{})
		wantStatus(t, "metadata after delete", err, 404)
		_, err = c.Beta.Files.Delete(ctx, up.ID, anthropic.BetaFileDeleteParams{})
		wantStatus(t, "delete twice", err, 404)
		if n := fileBlobs(t, d); n != before-1 {
			t.Fatalf("%d file blobs after delete, want %d", n, before-1)
		}

		// ListBySession is what the session layer reads.
		sf, err := d.Files().ListBySession(ctx, tenantID, "sesn_files1")
		if err != nil || len(sf) != 1 || sf[0].ID != prod.ID {
			t.Fatalf("ListBySession: %v %v", sf, err)
		}
	})
}

// TestFilesBadUploads: an upload over [files] max_upload_bytes is a 413
// naming the setting and leaves no row and no blob; a body that is not a
// well-formed multipart upload is a 400.
func TestFilesBadUploads(t *testing.T) {
	fileEngines(t, func(t *testing.T, engine daemontest.Option) {
		ctx := context.Background()
		const limit = 64 << 10
		d := daemontest.Start(t, engine, func(c *config.Config) { c.Files.MaxUploadBytes = limit })
		_, key := fileTenant(t, d, "files-bad")
		c := sdkClient(d, key)

		_, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(make([]byte, limit+1)), "big.bin", "")})
		wantStatus(t, "one byte over the limit", err, 413, "max_upload_bytes", "65536")
		_, err = c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(make([]byte, 10*limit)), "big.bin", "")})
		wantStatus(t, "ten times the limit", err, 413, "max_upload_bytes")
		list, err := c.Beta.Files.List(ctx, anthropic.BetaFileListParams{})
		if err != nil || len(list.Data) != 0 {
			t.Fatalf("files after refused uploads: %s %v", list.RawJSON(), err)
		}
		if n := fileBlobs(t, d); n != 0 {
			t.Fatalf("refused uploads left %d blobs", n)
		}
		exact, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(make([]byte, limit)), "exact.bin", "")})
		if err != nil || exact.SizeBytes != limit {
			t.Fatalf("upload of exactly the limit: %v %v", exact, err)
		}

		post := func(contentType, body string) (int, string) {
			req, _ := http.NewRequest("POST", d.URL+"/v1/files", strings.NewReader(body))
			req.Header.Set("x-api-key", key)
			req.Header.Set("Content-Type", contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		for _, tc := range []struct{ name, ctype, body, want string }{
			{"not multipart", "application/json", `{"file":"x"}`, "multipart/form-data"},
			{"no boundary", "multipart/form-data", "--x\r\n", "multipart"},
			{"truncated part", "multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nabc", "file"},
			{"garbage", "multipart/form-data; boundary=XX", "this is not multipart", "multipart"},
			{"no file part", "multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"expires_in_seconds\"\r\n\r\n3600\r\n--XX--\r\n", "file is required"},
			{"unknown field", "multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nx\r\n--XX--\r\n", "purpose"},
		} {
			code, body := post(tc.ctype, tc.body)
			if code != 400 || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %d %s, want 400 mentioning %q", tc.name, code, body, tc.want)
			}
		}
		list, err = c.Beta.Files.List(ctx, anthropic.BetaFileListParams{})
		if err != nil || len(list.Data) != 1 {
			t.Fatalf("files after malformed uploads: %s %v", list.RawJSON(), err)
		}
		if n := fileBlobs(t, d); n != 1 {
			t.Fatalf("malformed uploads left %d blobs besides the one file", n-1)
		}
	})
}

// TestFilesSDKGeneratedCalls runs the calls of the SDK's own generated
// betafile_test.go, field for field, with ids that exist.
func TestFilesSDKGeneratedCalls(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	tenantID, key := fileTenant(t, d, "files-gen")
	client := anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(key), option.WithMaxRetries(0))
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")

	// TestBetaFileUploadWithOptionalParams
	up, err := client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
		File:             io.Reader(bytes.NewBuffer([]byte("Example data"))),
		ExpiresInSeconds: anthropic.Int(3600),
		Betas:            betas,
		WorkspaceID:      ws,
	})
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	// A plain reader has no name: "unnamed" plus the extension of the type
	// sniffed from the bytes.
	if up.Filename != "unnamed.txt" || up.MimeType != "text/plain; charset=utf-8" {
		t.Fatalf("nameless upload: %s", up.RawJSON())
	}
	prod, err := d.Files().Create(ctx, tenantID, files.CreateParams{Filename: "abc.txt", Body: strings.NewReader("abc"), Downloadable: true, ScopeSessionID: "sesn_gen"})
	if err != nil {
		t.Fatal(err)
	}
	// A real cursor for "page": the next_page of a first page of one.
	first, err := client.Beta.Files.List(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(1)})
	if err != nil || first.NextPage == "" {
		t.Fatalf("first page: %v %v", first, err)
	}

	// TestBetaFileListWithOptionalParams sends ids together with page and
	// limit, which the SDK documents as mutually exclusive: a 400 naming
	// them. Its other fields, with real ids, list the file.
	_, err = client.Beta.Files.List(ctx, anthropic.BetaFileListParams{
		IDs: []string{prod.ID}, Limit: anthropic.Int(1), Page: anthropic.String(first.NextPage),
		ScopeID: anthropic.String("sesn_gen"), Betas: betas, WorkspaceID: ws,
	})
	wantStatus(t, "ids with page and limit", err, 400, "mutually exclusive")
	l, err := client.Beta.Files.List(ctx, anthropic.BetaFileListParams{IDs: []string{prod.ID}, ScopeID: anthropic.String("sesn_gen"), Betas: betas, WorkspaceID: ws})
	if err != nil || len(l.Data) != 1 || l.Data[0].ID != prod.ID {
		t.Fatalf("List: %v %v", l, err)
	}
	l, err = client.Beta.Files.List(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(1), Page: anthropic.String(first.NextPage), ScopeID: anthropic.String("sesn_gen"), Betas: betas, WorkspaceID: ws})
	if err != nil || len(l.Data) != 0 { // prod is newer than the cursor (up)
		t.Fatalf("List with page and scope: %v %v", l, err)
	}

	// TestBetaFileGetMetadataWithOptionalParams
	if _, err := client.Beta.Files.GetMetadata(ctx, up.ID, anthropic.BetaFileGetMetadataParams{Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatalf("GetMetadata: %v", err)
	}
	// TestBetaFileDownloadWithOptionalParams (its server answers "abc")
	resp, err := client.Beta.Files.Download(ctx, prod.ID, anthropic.BetaFileDownloadParams{Betas: betas, WorkspaceID: ws})
	if err != nil {
		t.Fatalf("Download: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(b, []byte("abc")) {
		t.Fatalf("return value not abc: %q %v", b, err)
	}
	// TestBetaFileDeleteWithOptionalParams
	if _, err := client.Beta.Files.Delete(ctx, up.ID, anthropic.BetaFileDeleteParams{Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	var apierr *anthropic.Error
	if _, err := client.Beta.Files.GetMetadata(ctx, up.ID, anthropic.BetaFileGetMetadataParams{}); !errors.As(err, &apierr) || apierr.StatusCode != 404 {
		t.Fatalf("deleted file: %v", err)
	}
}
