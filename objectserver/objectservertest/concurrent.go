package objectservertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

// concurrentApply sends probe apply calls from several goroutines at once
// (the daemon serializes by default, but a class may allow concurrency):
// each call must report exactly its own writes, in order, and no write may
// be lost. Storage must be empty on entry.
func concurrentApply(t *testing.T, base string) {
	const workers, calls = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*calls)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				p := fmt.Sprintf("w%d-%d", w, i)
				if err := applyPair(base, p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c := client{t: t, base: base, class: "probe", id: "p-1"}
	var dump map[string]json.RawMessage
	if err := json.Unmarshal(c.dump().body, &dump); err != nil {
		t.Fatalf("dump: %v", err)
	}
	if len(dump) != workers*calls*2 {
		t.Errorf("after %d concurrent calls of two puts each, storage has %d keys, want %d", workers*calls, len(dump), workers*calls*2)
	}
}

func applyPair(base, p string) error {
	body := fmt.Sprintf(`{"ops": [{"put": %q, "value": 1}, {"put": %q, "value": 2}]}`, p+"-a", p+"-b")
	req, err := http.NewRequest(http.MethodPost, base+"/apply", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(objectserver.HeaderStorageMode, objectserver.ModeWriteThrough)
	req.Header.Set(objectserver.HeaderObjectClass, "probe")
	req.Header.Set(objectserver.HeaderObjectID, "p-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Writes []struct {
			Key   string
			Value int
		}
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &env) != nil {
		return fmt.Errorf("apply %s: status %d body %s", p, resp.StatusCode, b)
	}
	if len(env.Writes) != 2 || env.Writes[0].Key != p+"-a" || env.Writes[1].Key != p+"-b" || env.Writes[1].Value != 2 {
		return fmt.Errorf("apply %s: writes %s, want exactly its own two, in order", p, b)
	}
	return nil
}
