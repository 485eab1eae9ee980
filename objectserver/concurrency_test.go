package objectserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/objectserver"
)

// Concurrent calls each report exactly their own writes, dumps taken
// meanwhile are whole JSON objects, and no write is lost. Run with -race.
func TestConcurrentCalls(t *testing.T) {
	s := objectserver.New()
	s.Method("put2", func(c *objectserver.Call) (any, error) {
		var prefix string
		if err := c.Args(&prefix); err != nil {
			return nil, err
		}
		for _, k := range []string{prefix + "-a", prefix + "-b"} {
			if err := c.Storage().Put(k, k); err != nil {
				return nil, err
			}
		}
		return len(c.Storage().Keys()), nil
	})
	// One call whose handler writes from several goroutines.
	s.Method("fanout", func(c *objectserver.Call) (any, error) {
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- c.Storage().Put(fmt.Sprint("fan-", i), i)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	srv := httptest.NewServer(s)
	defer srv.Close()

	const workers, calls = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*calls+100)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				p := fmt.Sprintf("w%d-%d", w, i)
				body, err := postWT(srv.URL+"/put2", `"`+p+`"`)
				if err != nil {
					errs <- err
					return
				}
				var env struct {
					Writes []struct{ Key string }
				}
				if err := json.Unmarshal(body, &env); err != nil {
					errs <- fmt.Errorf("put2 %s: %s: %v", p, body, err)
					return
				}
				if len(env.Writes) != 2 || env.Writes[0].Key != p+"-a" || env.Writes[1].Key != p+"-b" {
					errs <- fmt.Errorf("put2 %s: writes %s, want only its own two, in order", p, body)
				}
			}
		}()
	}
	stop := make(chan struct{})
	var dumps sync.WaitGroup
	dumps.Add(1)
	go func() {
		defer dumps.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := getDump(srv.URL); err != nil {
				errs <- err
				return
			}
		}
	}()
	body, err := postWT(srv.URL+"/fanout", "")
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(stop)
	dumps.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var env struct{ Writes []struct{ Key string } }
	if err := json.Unmarshal(body, &env); err != nil || len(env.Writes) != 10 {
		t.Errorf("fanout: %s: want 10 writes (%v)", body, err)
	}
	final, err := getDump(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != workers*calls*2+10 {
		t.Errorf("final storage has %d keys, want %d", len(final), workers*calls*2+10)
	}
}

// A restore replaces storage atomically: a dump taken during restores sees
// one whole restored state, never a mix.
func TestConcurrentRestore(t *testing.T) {
	srv := httptest.NewServer(objectserver.New())
	defer srv.Close()
	states := []string{`{"a":1,"b":1}`, `{"c":2,"d":2,"e":2}`, `{"f":3}`}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for _, st := range states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				resp, err := http.Post(srv.URL+objectserver.StoragePath, "application/json", strings.NewReader(st))
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 60 {
			d, err := getDump(srv.URL)
			if err != nil {
				errs <- err
				return
			}
			keys := make([]string, 0, len(d))
			for k := range d {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			switch strings.Join(keys, ",") {
			case "", "a,b", "c,d,e", "f":
			default:
				errs <- fmt.Errorf("dump saw a mixed state: %v", keys)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func postWT(url, body string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(objectserver.HeaderStorageMode, objectserver.ModeWriteThrough)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("POST %s: status %d: %s", url, resp.StatusCode, b)
	}
	return b, err
}

func getDump(base string) (map[string]json.RawMessage, error) {
	resp, err := http.Get(base + objectserver.StoragePath)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var d map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return nil, fmt.Errorf("dump is not a JSON object: %w", err)
	}
	return d, nil
}
