package warc_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/warc"
)

// demoSite is the demo shop of cmd/magpie, served from its files.
const demoSite = "../cmd/magpie/site"

// TestReplayWebPageShowsTheShop archives a crawl of the demo shop, loads the
// WARC into ReplayWeb.page (served on localhost, a secure context for its
// service worker) in headless Chromium, and finds the shop's home page
// replayed from the archive: its title inside the replay frame, and a
// screenshot that is not blank. The screenshot is kept in
// MAGPIE_WARC_SCREENSHOT when that names a file.
func TestReplayWebPageShowsTheShop(t *testing.T) {
	tools := warcTools(t)
	browser := chromium(t)

	shop := httptest.NewServer(http.FileServer(http.Dir(demoSite)))
	t.Cleanup(shop.Close)
	dir := t.TempDir()
	w, err := warc.New(dir, warc.Prefix("shop"))
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(w.Option(), magpie.Async(), magpie.MaxDepth(2))
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(shop.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("WARC files %v, want 1", files)
	}
	shop.Close() // the replay must come from the archive alone

	mux := http.NewServeMux()
	mux.Handle("/replay/", http.StripPrefix("/replay/", http.FileServer(http.Dir(filepath.Join(tools, "replaywebpage")))))
	mux.HandleFunc("/archive.warc.gz", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, files[0]) })
	target := shop.URL + "/"
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html><head><title>replay</title><script src="/replay/ui.js"></script></head>
<body style="margin:0"><replay-web-page style="display:block;width:100vw;height:100vh" source="/archive.warc.gz" url="%s" replayBase="/replay/" embed="replayonly"></replay-web-page></body></html>`, target)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	viewer := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	viewer.Start()
	t.Cleanup(viewer.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	viewerURL := "http://localhost:" + port + "/"

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.UserDataDir(t.TempDir()), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// Every frame that finishes loading is a moment to look for the title.
	loaded := make(chan struct{}, 1)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if err := chromedp.Listen(bctx, func(ev any) {
		if _, ok := ev.(*page.EventFrameStoppedLoading); ok {
			select {
			case loaded <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, page.Navigate, page.NavigateParams{URL: viewerURL}); err != nil {
		t.Fatalf("loading ReplayWeb.page: %v", err)
	}
	const want = "Welcome | Magpie Books"
	var titles []string
	for found := false; !found; {
		depth, pierce := int64(-1), true
		doc, err := chromedp.Call(bctx, dom.GetDocument, dom.GetDocumentParams{Depth: &depth, Pierce: &pierce})
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		titles = titlesIn(doc.Root, nil)
		for _, s := range titles {
			found = found || strings.TrimSpace(s) == want
		}
		if found {
			break
		}
		select {
		case <-loaded:
		case <-ctx.Done():
			t.Fatalf("the replayed shop never showed %q; titles in the page: %q", want, titles)
		}
	}
	res, err := chromedp.Call(bctx, page.CaptureScreenshot, page.CaptureScreenshotParams{})
	if err != nil {
		t.Fatal(err)
	}
	shot := res.Data
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colors := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
		}
	}
	if len(colors) < 8 {
		t.Errorf("the screenshot is nearly blank: %d colours", len(colors))
	}
	if p := os.Getenv("MAGPIE_WARC_SCREENSHOT"); p != "" {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// titlesIn collects the text of every <title> in the tree under n,
// through frames and shadow roots.
func titlesIn(n *cdp.Node, out []string) []string {
	if n == nil {
		return out
	}
	if strings.EqualFold(n.NodeName, "title") {
		var text strings.Builder
		for _, c := range n.Children {
			text.WriteString(c.NodeValue)
		}
		out = append(out, text.String())
	}
	for _, c := range n.Children {
		out = titlesIn(c, out)
	}
	for _, s := range n.ShadowRoots {
		out = titlesIn(s, out)
	}
	return titlesIn(n.ContentDocument, out)
}

// chromium returns the browser to run: skipped without one, failed when
// MAGPIE_REQUIRE_CHROMIUM=1 (as CI sets).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MAGPIE_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("MAGPIE_REQUIRE_CHROMIUM=1 but no chromium on PATH")
	}
	t.Skip("no chromium on PATH")
	return ""
}
