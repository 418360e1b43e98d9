package server_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The real-browser harness: a headless Chromium driven over the DevTools
// protocol (chromedp). The console's browser tests use it; without a
// Chromium on the machine they skip, saying so — and the root pass of
// .ci/run, which installs Debian's chromium, fails on any skip.

// chromiumPath finds the browser: Debian's package installs
// /usr/bin/chromium; other systems name it differently.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium process; each context from newTab is a
// fresh browser context (its own cookies), like a second person at a
// second computer.
type browser struct {
	t     *testing.T
	w, h  int64
	alloc context.Context
	root  context.Context
}

// newBrowser starts headless Chromium with a window of w×h, or skips the
// test when no Chromium is installed.
func newBrowser(t *testing.T, w, h int) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("chromium not installed (Debian: apt-get install chromium; .ci/run installs it)")
	}
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(path),
		chromedp.WindowSize(w, h),
		chromedp.Flag("lang", "en-US"),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("font-render-hinting", "none"),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its own sandbox on (its
		// setuid/namespace sandbox drops to an unprivileged user it cannot
		// be as root). The pages it loads here are the test's own server's;
		// as an unprivileged user (the rootless CI pass) the sandbox stays
		// on.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	b := &browser{t: t, alloc: actx, w: int64(w), h: int64(h)}
	root, cancelRoot := chromedp.NewContext(actx, chromedp.WithErrorf(func(f string, a ...any) { t.Logf("chromedp: "+f, a...) }))
	// Start the process now, so a broken install fails here with its
	// reason rather than in the first step of a flow. (The browser lives as
	// long as the context of the first Do, so that is root itself; a timer
	// bounds the start.)
	stuck := time.AfterFunc(30*time.Second, cancelRoot)
	err := chromedp.Do(root)
	if !stuck.Stop() {
		err = fmt.Errorf("did not start within 30s (%v)", err)
	}
	if err != nil {
		cancelRoot()
		cancelAlloc()
		t.Fatalf("starting %s: %v", path, err)
	}
	b.root = root
	t.Cleanup(func() {
		cancelRoot()
		cancelAlloc()
	})
	return b
}

// tab is a page in a fresh browser context (no cookies shared with other
// tabs) with a viewport of the browser's size, with its console messages,
// exceptions and browser log recorded.
type tab struct {
	b    *browser
	t    *testing.T // the (sub)test the tab's steps fail
	name string
	ctx  context.Context
	w, h int64 // the viewport
	log  *consoleLog
}

// consoleLog is what a tab's console recorded.
type consoleLog struct {
	mu   sync.Mutex
	errs []string // guarded by mu
}

// in returns the tab for use in the subtest t: its failures fail t.
func (tb *tab) in(t *testing.T) *tab {
	c := *tb
	c.t = t
	return &c
}

func (b *browser) newTab(name string) *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.root, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	tb := &tab{b: b, t: b.t, name: name, ctx: ctx, w: b.w, h: b.h, log: &consoleLog{}}
	stuck := time.AfterFunc(20*time.Second, cancel)
	err := chromedp.Do(ctx, chromedp.EmulateViewport(b.w, b.h))
	if !stuck.Stop() {
		err = fmt.Errorf("no new tab within 20s (%v)", err)
	}
	if err != nil {
		b.t.Fatalf("%s: new browser context: %v", name, err)
	}
	// The console's messages, the uncaught exceptions and the browser's
	// log (where CSP violations are reported), until the tab closes.
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			tb.note(m.URL + ": " + m.String())
		}
	}()
	return tb
}

// viewport changes the tab's viewport (a phone's width, say).
func (tb *tab) viewport(w, h int64, opts ...chromedp.EmulateViewportOption) {
	tb.t.Helper()
	tb.do(fmt.Sprintf("viewport %dx%d", w, h), 10*time.Second, chromedp.EmulateViewport(w, h, opts...))
	tb.w, tb.h = w, h
}

func (tb *tab) note(s string) {
	tb.log.mu.Lock()
	tb.log.errs = append(tb.log.errs, s)
	tb.log.mu.Unlock()
}

// errors is what the tab's console recorded, but for the browser's own
// request for /favicon.ico (made by every page load, whatever the page).
func (tb *tab) errors() []string {
	tb.log.mu.Lock()
	defer tb.log.mu.Unlock()
	var out []string
	for _, e := range tb.log.errs {
		if strings.Contains(e, "/favicon.ico: ") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// do runs actions with a deadline; a failure names the tab, the step and
// the page it was on.
func (tb *tab) do(step string, within time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, within)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %s (on %s): %v", tb.name, step, tb.location(), err)
	}
}

// location is the tab's page and the start of its text, for a failure's
// message.
func (tb *tab) location() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "an unknown page: " + err.Error()
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 400) : ""`))
	return fmt.Sprintf("%s, reading %q", loc, text)
}

// get runs one action that returns a value, with a deadline.
func get[T any](tb *tab, step string, within time.Duration, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, within)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.t.Fatalf("%s: %s (on %s): %v", tb.name, step, tb.location(), err)
	}
	return v
}

// shots is where screenshots go: $CORDON_SCREENSHOTS when set (.ci/run
// sets it and keeps the directory), else the test's temporary directory.
func shots(t *testing.T) string {
	dir := os.Getenv("CORDON_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("CORDON_SCREENSHOTS=%s: %v", dir, err)
	}
	return dir
}

// screenshot saves the viewport as dir/name.png and checks that something
// rendered: the PNG decodes, has the viewport's size, and is not one
// colour.
func (tb *tab) screenshot(dir, name string) string {
	tb.t.Helper()
	buf := get(tb, "screenshot "+name, 15*time.Second, chromedp.CaptureScreenshot())
	if err := checkRendered(buf, tb.w, tb.h); err != nil {
		tb.t.Fatalf("%s: screenshot %s: %v", tb.name, name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	return p
}

// checkRendered is the "not empty" check of a screenshot: it decodes as
// PNG, and at least two clearly different colours appear (a blank or
// failed page is one flat colour).
func checkRendered(b []byte, w, h int64) error {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a PNG: %v", err)
	}
	bd := img.Bounds()
	if int64(bd.Dx()) != w || int64(bd.Dy()) != h {
		return fmt.Errorf("%dx%d pixels, want the viewport's %dx%d", bd.Dx(), bd.Dy(), w, h)
	}
	return distinctColours(img, 3)
}

func distinctColours(img image.Image, want int) error {
	seen := map[[3]uint32]bool{}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y += 2 {
		for x := bd.Min.X; x < bd.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 12, g >> 12, b >> 12}] = true
			if len(seen) >= want {
				return nil
			}
		}
	}
	return fmt.Errorf("only %d colour(s) in the page: nothing rendered", len(seen))
}
