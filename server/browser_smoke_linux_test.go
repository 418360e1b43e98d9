package server_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserHarness: the harness starts Chromium, loads a page of the
// test server and takes a screenshot that is not blank.
func TestBrowserHarness(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t, 1280, 800)
	tb := b.newTab("smoke")
	tb.do("open /healthz", 20*time.Second, chromedp.Navigate(e.url+"/healthz"))
	body := get(tb, "read the body", 5*time.Second, chromedp.Text(chromedp.CSS("body")))
	if body == "" {
		t.Fatal("empty body")
	}
	tb.screenshot(shots(t), "healthz")
	tb.viewport(390, 844)
	tb.screenshot(t.TempDir(), "healthz-narrow")
	if errs := tb.errors(); len(errs) != 0 {
		t.Fatalf("console: %q", errs)
	}
}
