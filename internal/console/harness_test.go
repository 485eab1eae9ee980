package console_test

import (
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// The console in a real browser: Debian's chromium, driven through the
// DevTools protocol (chromedp). Every page must load with no console
// error, no failed request and no refused resource (the CSP reports its
// refusals as errors), pass the accessibility basics, and let the Tab key
// reach each of its controls in order. harness_self_test.go shows each
// check failing on a page made with its defect.

// page is a browser tab on the console, recording what went wrong in it.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	mu   sync.Mutex
	errs []string
	// expected are the error answers the test means to show.
	expected []expectation
	// shots is where screenshots go (the test's artifact directory).
	shots string
}

// expectation is an error status a test expects for a path.
type expectation struct {
	status int64
	path   string
	seen   bool
}

func newPage(t *testing.T, base string) *page {
	t.Helper()
	chrome := testenv.Command(t, "chromium", "apt-get install chromium; scripts/test.sh installs it")
	profile, err := os.MkdirTemp("", "akchrome")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	p := &page{t: t, ctx: ctx, base: base, shots: t.ArtifactDir()}
	t.Cleanup(func() {
		// Ends the browser and waits for it, then removes its profile.
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
		os.RemoveAll(profile)
	})
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.fault("exception: %s %s", e.ExceptionDetails.Text, exceptionText(e.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					if a.Value != nil {
						args = append(args, strings.Trim(string(a.Value), `"`))
					} else {
						args = append(args, a.Description)
					}
				}
				p.fault("console.%s: %s", e.Type, strings.Join(args, " "))
			}
		case *cdplog.EventEntryAdded:
			// The browser logs each answer >= 400 too; the answer itself
			// (below) is the fault, or expected.
			if e.Entry.Level == cdplog.EntryLevelError &&
				!(e.Entry.Source == cdplog.EntrySourceNetwork && strings.Contains(e.Entry.Text, "the server responded with a status of")) {
				p.fault("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		case *network.EventLoadingFailed:
			if !e.Canceled {
				p.fault("request failed: %s (%s)", e.ErrorText, e.BlockedReason)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 && !p.expectedAnswer(e.Response.Status, e.Response.URL) {
				p.fault("HTTP %d for %s", e.Response.Status, e.Response.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		call(ctx, network.Enable, network.EnableParams{}),
		call(ctx, runtime.Enable, cdp.Empty{}),
		call(ctx, cdplog.Enable, cdp.Empty{}),
		// A headless tab never has the window's focus: without this a
		// focus() from script is not where the next Tab starts from.
		call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func call[P, R any](ctx context.Context, cmd cdp.Command[P, R], params P) error {
	_, err := chromedp.Call(ctx, cmd, params)
	return err
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

func (p *page) fault(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// faults are the browser faults so far (the listener adds to them as it
// runs).
func (p *page) faults() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// expect declares that the next answer for path (without its query) has
// status: an error page the test means to show, such as the Not found
// page of another tenant's session. That answer is then no fault, but the
// next check fails if it did not come.
func (p *page) expect(status int, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected = append(p.expected, expectation{status: int64(status), path: path})
}

// expectedAnswer says whether an answer was expected, and marks it seen.
func (p *page) expectedAnswer(status int64, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range p.expected {
		if !e.seen && e.status == status && e.path == u.Path {
			p.expected[i].seen = true
			return true
		}
	}
	return false
}

// run runs browser actions, failing the test on an error.
func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\nbrowser faults: %v", what, err, p.faults())
	}
}

// eval evaluates a script in the page and returns its value.
func eval[T any](p *page, what, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: %v\nbrowser faults: %v", what, err, p.faults())
	}
	return v
}

// check fails the test on anything that went wrong in the page so far or
// that the page shown misses (see findings) and keeps a screenshot of it.
func (p *page) check(name string) {
	p.t.Helper()
	if f := p.findings(); len(f) > 0 {
		p.t.Fatalf("page %s: %d findings:\n%s", name, len(f), strings.Join(f, "\n"))
	}
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// findings returns, and forgets, what went wrong in the page since the
// last call (browser faults, an expected error answer that did not come)
// and what the page shown misses of the accessibility basics, its Tab walk
// included.
func (p *page) findings() []string {
	p.t.Helper()
	p.mu.Lock()
	f := p.errs
	p.errs = nil
	for _, e := range p.expected {
		if !e.seen {
			f = append(f, fmt.Sprintf("expected HTTP %d for %s, which did not come", e.status, e.path))
		}
	}
	p.expected = nil
	p.mu.Unlock()
	a11y := eval[struct {
		Violations []string
		Focusable  []string
	}](p, "accessibility check", a11yCheck)
	f = append(f, a11y.Violations...)
	return append(f, p.tabWalk(a11y.Focusable)...)
}

// a11yCheck lists what a page misses of the accessibility basics and the
// controls the Tab key must reach (testdata/a11y.js says which).
//
//go:embed testdata/a11y.js
var a11yCheck string

// tabWalk presses Tab from the first control to the last, with real key
// events, and reports the first press that did not move the focus to the
// next control in order, and every control never reached (the a11y check
// left them in window.__akWalk; its focus listener records where each
// press landed in window.__akLanded). Every control is walked, with no
// bound: the presses go as one batch and the landings are read once, so
// the cost is a few milliseconds a control (the 450-event session page of
// TestBrowserSessionScrollBack walks its 466 controls in about 2s under
// -race).
func (p *page) tabWalk(controls []string) []string {
	p.t.Helper()
	if len(controls) == 0 {
		return nil
	}
	if !eval[bool](p, "focus the first control", `window.__akWalk[0].focus(), window.__akLanded = [], document.activeElement === window.__akWalk[0]`) {
		return []string{"keyboard: the first control takes no focus: " + controls[0]}
	}
	start := time.Now()
	p.run("Tab through the page", chromedp.KeyEvent(strings.Repeat("\t", len(controls)-1)))
	landed := eval[[]string](p, "where the Tabs landed", `window.__akLanded`)
	p.t.Logf("keyboard: %d controls walked with Tab in %s", len(controls), time.Since(start).Round(time.Millisecond))
	// The first press that went astray, and every control never reached.
	var out []string
	reached := map[string]bool{"0": true}
	for i, l := range landed {
		reached[l] = true
		if l == strconv.Itoa(i+1) || len(out) > 0 {
			continue
		}
		// l is a control's index, or what the focus landed on beyond them
		// (a script can move it more than once a press).
		got, want := l, "no more landings"
		if n, err := strconv.Atoi(l); err == nil {
			got = controls[n]
		}
		if i+1 < len(controls) {
			want = controls[i+1]
		}
		out = append(out, fmt.Sprintf("keyboard: Tab %d lands on %s, want %s", i+1, got, want))
	}
	for i, c := range controls {
		if !reached[strconv.Itoa(i)] {
			out = append(out, "keyboard: not reached with Tab: "+c)
		}
	}
	return out
}
