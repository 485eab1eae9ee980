package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// DestroySandboxes destroys every sandbox the daemon at baseURL knows,
// through its API with an admin key (which sees every tenant's), and
// reports on t what it could not destroy. Sandboxes outlive their daemon by
// design, a SIGKILLed one too: a test that killed its daemon starts it
// again on the same home and calls this before stopping it for good.
func DestroySandboxes(t testing.TB, baseURL, adminKey string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := call(ctx, http.MethodGet, baseURL+"/v1/sandboxes", adminKey, &list); err != nil {
		t.Errorf("clean up sandboxes: %v", err)
		return
	}
	for _, sb := range list.Data {
		if err := call(ctx, http.MethodDelete, baseURL+"/v1/sandboxes/"+sb.ID, adminKey, nil); err != nil {
			t.Errorf("clean up sandbox %s: %v", sb.ID, err)
		}
	}
}

func call(ctx context.Context, method, url, key string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, body)
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}
