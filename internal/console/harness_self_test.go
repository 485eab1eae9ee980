package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The browser harness's own tests: each check must fail on a page made
// with its defect, and a clean page must pass them all, or the console's
// browser tests prove nothing.

// harnessSite serves the pages of these tests with the console's CSP.
func harnessSite(t *testing.T) *httptest.Server {
	// An icon, or the browser asks for /favicon.ico.
	const icon = `<link rel="icon" href="/i.svg" type="image/svg+xml">`
	const head = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>%s</title>` + icon +
		`<link rel="stylesheet" href="/s.css"><script src="/%s.js" defer></script></head>`
	pages := map[string]string{
		// Everything the checks look at, done right.
		"/clean": strings.NewReplacer("%s.js", "quiet.js", "%s", "Clean").Replace(head) + `<body>
<a class="skip" href="#main">Skip to content</a>
<main id="main" tabindex="-1"><h1>Clean</h1>
<form><label for="q">Query</label><input id="q"> <label><input type="checkbox" name="c"> also</label>
<select aria-label="Kind"><option>a</option></select>
<input type="radio" name="r" value="1" aria-label="one"><input type="radio" name="r" value="2" aria-label="two">
<span id="n-label">Note</span><textarea aria-labelledby="n-label"></textarea>
<button type="submit">Search</button><button type="button" disabled>Off</button></form>
<details><summary>More <span class="pointer">(open)</span></summary><a href="/hidden">hidden until opened</a></details>
<table><tr><th scope="col">A</th></tr><tr><td>1</td></tr></table>
<img src="/i.svg" alt="">
<svg role="img" aria-label="A picture"><rect width="4" height="4"/></svg>
<svg role="img"><title>Another picture</title><rect width="4" height="4"/></svg>
<svg aria-hidden="true"><rect width="4" height="4"/></svg>
<pre class="scroll">a box that scrolls
2
3
4
5</pre>
<span class="pointer" role="button" tabindex="0">a span made a button</span>
</main></body></html>`,
		// One of each defect the checks must find; the keyboard trap comes
		// after 40 links, past where a walk of the first 30 would stop.
		"/defects": strings.NewReplacer("%s.js", "noisy.js", "%s", "Defects").Replace(head) + `<body>
<main id="main"><h1>Defects</h1>
<script>document.title = "inline scripts are refused"</script>
<img src="/missing.png" alt="">
<input id="nolabel">
<label for="nowhere">Ghost</label>
<svg class="bare"><rect width="4" height="4"/></svg>
<svg role="img"><rect width="4" height="4"/></svg>
<div class="pointer">click me</div>
<span role="button">a span that says it is a button</span>
<p id="handled">a paragraph with a click handler</p>
` + strings.Repeat(`<a href="/more">More</a> `, 40) + `
<textarea id="trap" aria-label="Trap"></textarea>
<button type="button" id="after">After the trap</button>
</main></body></html>`,
		// The structural defects.
		"/structure": `<!doctype html><html><head><meta charset="utf-8"><title> </title>` + icon + `</head><body>
<h1>One</h1><h1>Two</h1>
<button></button><a href="/x" aria-labelledby="missing"></a><img src="/i.svg">
<table><tr><th>no scope</th></tr></table><p id="twice"></p><p id="twice"></p>
<a href="/late" tabindex="2">Late</a> <a href="/early" tabindex="1">Early</a>
</body></html>`,
	}
	assets := map[string][2]string{
		"/s.css":    {"text/css", ".pointer{cursor:pointer} .skip{position:absolute;left:-999px} .skip:focus{left:0} .scroll{height:2em;overflow:auto}"},
		"/quiet.js": {"text/javascript", `document.documentElement.dataset.ran = "1";`},
		// A console.error, a click handler on a <p>, and a keyboard trap:
		// the textarea keeps the focus on Tab, so the button after it is
		// never reached.
		"/noisy.js": {"text/javascript", `console.error("noisy", 42);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("handled").onclick = () => {};
  document.getElementById("trap").addEventListener("keydown", (e) => { if (e.key === "Tab") e.preventDefault(); });
});`},
		"/i.svg": {"image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'")
		if p, ok := pages[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(p))
			return
		}
		if a, ok := assets[r.URL.Path]; ok {
			w.Header().Set("Content-Type", a[0])
			w.Write([]byte(a[1]))
			return
		}
		// A Not found page that is itself clean.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`<!doctype html><html lang="en"><head><title>Not found</title>` + icon +
			`</head><body><main><h1>Not found</h1><p><a href="/clean">Back</a></p></main></body></html>`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// wantFindings fails t unless each of want is part of one finding.
func wantFindings(t *testing.T, page string, got []string, want ...string) {
	t.Helper()
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("%s: the findings lack %q; they are:\n%s", page, w, all)
		}
	}
}

func TestHarnessFindsEachDefect(t *testing.T) {
	srv := harnessSite(t)
	p := newPage(t, srv.URL)

	p.run("clean page", chromedp.Navigate(srv.URL+"/clean"))
	if !eval[bool](p, "the script ran", `document.documentElement.dataset.ran === "1"`) {
		t.Fatal("the clean page's script did not run")
	}
	if f := p.findings(); len(f) > 0 {
		t.Fatalf("the clean page has findings:\n%s", strings.Join(f, "\n"))
	}

	p.run("page with defects", chromedp.Navigate(srv.URL+"/defects"))
	wantFindings(t, "defects", p.findings(),
		"console.error: noisy 42",
		"Content Security Policy",
		"HTTP 404 for "+srv.URL+"/missing.png",
		"no label: input#nolabel",
		`label for a missing id "nowhere"`,
		`svg neither role=img with a name (aria-label or <title>) nor aria-hidden: svg[class="bare"]`,
		`svg neither role=img with a name (aria-label or <title>) nor aria-hidden: svg[role="img"]`,
		`looks clickable but takes no focus: div[class="pointer"] "click me"`,
		`looks clickable but takes no focus: span[role="button"]`,
		`looks clickable but takes no focus: p#handled`,
		`keyboard: not reached with Tab: button#after[type="button"] "After the trap"`,
	)

	p.run("page with structural defects", chromedp.Navigate(srv.URL+"/structure"))
	wantFindings(t, "structure", p.findings(),
		"no accessible name: button",
		`no accessible name: a[href="/x"]`,
		"img without alt",
		"h1 count 2",
		"no main landmark",
		"no lang on html",
		"no title",
		"duplicate id twice",
		"th without scope",
		`positive tabindex: a[href="/late"]`,
		`lands on a[href="/early"] "Early", want a[href="/late"] "Late"`,
	)
}

// An error answer is a finding unless the test expects it, and an
// expected one that does not come is a finding too.
func TestHarnessExpectedStatus(t *testing.T) {
	srv := harnessSite(t)
	p := newPage(t, srv.URL)

	p.run("unexpected Not found", chromedp.Navigate(srv.URL+"/gone"))
	wantFindings(t, "unexpected", p.findings(), "HTTP 404 for "+srv.URL+"/gone")

	p.expect(http.StatusNotFound, "/gone")
	p.run("expected Not found", chromedp.Navigate(srv.URL+"/gone?x=1"))
	if f := p.findings(); len(f) > 0 {
		t.Fatalf("the expected Not found page has findings:\n%s", strings.Join(f, "\n"))
	}
	// The expectation was for one answer: the next is a fault again.
	p.run("Not found again", chromedp.Navigate(srv.URL+"/gone"))
	wantFindings(t, "again", p.findings(), "HTTP 404 for "+srv.URL+"/gone")

	p.expect(http.StatusNotFound, "/clean")
	p.run("a page that is found", chromedp.Navigate(srv.URL+"/clean"))
	wantFindings(t, "found", p.findings(), "expected HTTP 404 for /clean, which did not come")
}
