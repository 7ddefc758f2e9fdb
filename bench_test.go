package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

// benchWords fill the paragraphs of benchPage.
var benchWords = strings.Fields("signal visited cedar packet parallel scheduler queue storage copper delay " +
	"host thistle orchard buffer otter link stream juniper anchor worker pool callback rule limit maple market " +
	"magpie meadow page heron river lantern response cookie falcon request token frontier willow parser header")

// benchPage renders page i of an n-page site like bench/cmd/site: about
// 16 KiB of paragraphs carrying links (the next page, so that every page is
// reachable, then pseudo-random ones, some written absolutely with base,
// one duplicate and one to a foreign host).
func benchPage(base string, i, n int) []byte {
	state := uint64(i)*6364136223846793005 + 1442695040888963407
	rnd := func(m int) int {
		state = state*6364136223846793005 + 1442695040888963407
		return int((state >> 33) % uint64(m))
	}
	links := []string{"/p/" + strconv.Itoa((i+1)%n)}
	for len(links) < 8 {
		p := "/p/" + strconv.Itoa(rnd(n))
		if rnd(4) == 0 {
			p = base + p
		}
		links = append(links, p)
	}
	links = append(links, links[rnd(len(links))], "http://external.invalid/p/"+strconv.Itoa(rnd(n)))

	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Page %d</title>\n</head>\n<body>\n<nav><ul>\n", i)
	for _, l := range links[:2] {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", l, l)
	}
	fmt.Fprintf(&b, "</ul></nav>\n<main>\n<h1>Page %d</h1>\n", i)
	rest := links[2:]
	for section := 0; len(rest) > 0 || b.Len() < 16<<10; section++ {
		if section%3 == 0 {
			fmt.Fprintf(&b, "<h2>Section %d</h2>\n", section/3+1)
		}
		b.WriteString("<p>")
		for range 70 {
			b.WriteString(benchWords[rnd(len(benchWords))])
			b.WriteByte(' ')
		}
		if len(rest) > 0 {
			fmt.Fprintf(&b, "See <a href=\"%s\">%s</a>.", rest[0], benchWords[rnd(len(benchWords))])
			rest = rest[1:]
		}
		b.WriteString("</p>\n")
	}
	b.WriteString("</main>\n<footer><p>synthetic site</p></footer>\n</body>\n</html>\n")
	return []byte(b.String())
}

// newBenchSite serves n pages of benchPage at /p/0 ... /p/{n-1}.
func newBenchSite(tb testing.TB, n int) *httptest.Server {
	tb.Helper()
	var pages [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil || i < 0 || i >= len(pages) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(pages[i])
	}))
	for i := range n {
		pages = append(pages, benchPage(srv.URL, i, n))
	}
	tb.Cleanup(srv.Close)
	return srv
}

// benchResponse is a 16 KiB page as the analyzer receives it.
func benchResponse(tb testing.TB, c *Collector) *Response {
	tb.Helper()
	u, err := url.Parse("http://127.0.0.1:1/p/0")
	if err != nil {
		tb.Fatal(err)
	}
	req, err := c.newRequest(u.String(), http.MethodGet, 1, nil, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	return &Response{StatusCode: 200, Body: benchPage("http://127.0.0.1:1", 0, 1000), Headers: &h, Request: req, Ctx: req.Ctx}
}

var benchSink string

// BenchmarkAnalyzeHTML is the analysis of one 16 KiB page with one
// OnHTML("a[href]") callback: parse (or stream, with StreamHTML), selection,
// HTMLElement construction and dispatch.
func BenchmarkAnalyzeHTML(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "parse", true: "stream"}[stream], func(b *testing.B) {
			c := NewCollector()
			links := 0
			c.OnHTML("a[href]", func(e *HTMLElement) {
				benchSink = e.Request.AbsoluteURL(e.Attr("href"))
				links++
			})
			resp := benchResponse(b, c)
			b.SetBytes(int64(len(resp.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.runResponseCallbacks(resp, stream); err != nil {
					b.Fatal(err)
				}
			}
			if links == 0 {
				b.Fatal("OnHTML never ran")
			}
			if stream && c.Stats().HTMLStreamed == 0 {
				b.Fatal("the page was not streamed")
			}
		})
	}
}

// BenchmarkAnalyzeNoDocumentCallbacks is the analysis of a page when only
// OnResponse is registered: no HTML parse must happen.
func BenchmarkAnalyzeNoDocumentCallbacks(b *testing.B) {
	c := NewCollector()
	c.OnResponse(func(r *Response) { benchSink = r.Request.URL.Path })
	resp := benchResponse(b, c)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.runResponseCallbacks(resp, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTMLElement measures the helpers a typical callback uses on a
// matched element.
func BenchmarkHTMLElement(b *testing.B) {
	c := NewCollector()
	resp := benchResponse(b, c)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(string(resp.Body)))
	if err != nil {
		b.Fatal(err)
	}
	sel := doc.Find("main")
	e := NewHTMLElementFromSelectionNode(resp, sel, nil, 0)
	b.Run("Attr", func(b *testing.B) {
		a := NewHTMLElementFromSelectionNode(resp, doc.Find("a[href]").First(), nil, 0)
		b.ReportAllocs()
		for b.Loop() {
			benchSink = a.Attr("href")
		}
	})
	b.Run("ChildText", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = e.ChildText("h1")
		}
	})
	b.Run("ChildAttr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = e.ChildAttr("p a", "href")
		}
	})
	b.Run("ChildAttrs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = strings.Join(e.ChildAttrs("a", "href"), "")
		}
	})
	b.Run("New", func(b *testing.B) {
		n := doc.Find("a[href]")
		b.ReportAllocs()
		for b.Loop() {
			benchSink = NewHTMLElementFromSelectionNode(resp, n, n.Nodes[0], 0).Name
		}
	})
}

// BenchmarkVisitDuplicate is Request.Visit of a link already visited: the
// fate of most links of a crawl, refused at admission and sent to OnError.
func BenchmarkVisitDuplicate(b *testing.B) {
	srv := newBenchSite(b, 1)
	c := NewCollector(Async(true), IgnoreRobotsTxt())
	var refused atomic.Int64
	// Refusals go to OnRefused (OnError is for requests that were sent).
	c.OnRefused(func(_ *Request, err error) {
		if _, ok := errors.AsType[*AlreadyVisitedError](err); ok {
			refused.Add(1)
		}
	})
	var parent *Request
	c.OnResponse(func(r *Response) { parent = r.Request })
	if err := c.Visit(srv.URL + "/p/0"); err != nil {
		b.Fatal(err)
	}
	c.Wait()
	if parent == nil {
		b.Fatal("no response")
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := parent.Visit("/p/0"); err == nil {
			b.Fatal("Visit of a visited page succeeded")
		}
	}
	if refused.Load() == 0 {
		b.Fatal("OnRefused saw no AlreadyVisitedError")
	}
}

// BenchmarkCrawl crawls a 200-page site of 16 KiB pages (10 links each)
// with 16 workers, OnHTML("a[href]") visiting every link and an OnError
// callback; pages/s is reported.
func BenchmarkCrawl(b *testing.B) {
	const pages = 200
	srv := newBenchSite(b, pages)
	for _, mode := range []string{"async", "sync", "async-stream"} {
		b.Run(mode, func(b *testing.B) {
			var got, refused atomic.Int64
			b.ReportAllocs()
			for b.Loop() {
				c := NewCollector(Async(mode != "sync"), AllowedDomains("127.0.0.1"), Workers(16))
				if mode == "async-stream" {
					StreamHTML()(c)
				}
				c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
				c.OnResponse(func(*Response) { got.Add(1) })
				// Like bench/magpie: most links are refused (visited,
				// foreign host) and every refusal reaches OnError.
				c.OnError(func(*Response, error) { refused.Add(1) })
				if err := c.Visit(srv.URL + "/p/0"); err != nil {
					b.Fatal(err)
				}
				c.Wait()
			}
			if n := got.Load(); n != int64(pages)*int64(b.N) {
				b.Fatalf("crawled %d pages in %d runs, want %d each", n, b.N, pages)
			}
			b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "pages/s")
		})
	}
}

// TestSyncVisitFromFetchNoDeadlock checks that the user code a download runs
// (request-side callbacks, the redirect handler) still has its goroutine
// marked, so a sync c.Visit from it returns instead of waiting for the crawl
// it is part of. With one worker a missing mark deadlocks.
func TestSyncVisitFromFetchNoDeadlock(t *testing.T) {
	tests := []struct {
		name     string
		register func(c *Collector, visit func())
	}{
		{"OnRequest", func(c *Collector, visit func()) { c.OnRequest(func(*Request) { visit() }) }},
		{"OnRequestHeaders", func(c *Collector, visit func()) { c.OnRequestHeaders(func(*Request) { visit() }) }},
		{"OnResponseHeaders", func(c *Collector, visit func()) { c.OnResponseHeaders(func(*Response) { visit() }) }},
		{"redirect handler", func(c *Collector, visit func()) {
			c.SetRedirectHandler(func(*http.Request, []*http.Request) error { visit(); return nil })
		}},
		{"OnRefused", func(c *Collector, visit func()) { c.OnRefused(func(*Request, error) { visit() }) }},
		{"OnResponse of a CheckHead", func(c *Collector, visit func()) {
			c.CheckHead = true
			c.OnResponse(func(r *Response) {
				if r.Request.Method == http.MethodHead {
					visit()
				}
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t)
			c := NewCollector(Workers(1))
			var once atomic.Bool
			tt.register(c, func() {
				if once.CompareAndSwap(false, true) {
					_ = c.Visit(ts.URL + "/leaf")
				}
			})
			start := ts.URL + "/redirect"
			if tt.name == "OnRefused" {
				start = "http://forbidden.invalid/"
				c.AllowedDomains = []string{"127.0.0.1"}
			}
			done := make(chan error, 1)
			go func() { done <- c.Visit(start) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Visit(%q) with c.Visit from %s did not return", start, tt.name)
			}
			c.Wait()
			if !once.Load() {
				t.Fatalf("%s never ran", tt.name)
			}
			want := 1
			if c.CheckHead {
				want = 2 // its HEAD and its GET
			}
			if n := ts.count("/leaf"); n != want {
				t.Errorf("fetches of /leaf = %d, want %d", n, want)
			}
		})
	}
}

// TestRequestVisitNeverWaits checks that Request.Visit from outside any
// callback returns at once in sync mode, as documented, instead of waiting
// for the crawl.
func TestRequestVisitNeverWaits(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<p>x</p>"))
	}))
	defer srv.Close()
	defer close(release)
	c := NewCollector(IgnoreRobotsTxt())
	var parent *Request
	c.OnResponse(func(r *Response) { parent = r.Request })
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit(/) error = %v, want nil", err)
	}
	if parent == nil {
		t.Fatal("no response for /")
	}
	done := make(chan error, 1)
	go func() { done <- parent.Visit("/slow") }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Request.Visit(/slow) error = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Request.Visit(/slow) waited for the crawl")
	}
	c.Stop()
}

// TestHotPathAllocations pins the allocation-free steps of admission.
func TestHotPathAllocations(t *testing.T) {
	c := NewCollector()
	c.OnHTML("a", func(*HTMLElement) {})
	u, err := url.Parse("http://127.0.0.1:8080/p/1?q=2")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    func()
	}{
		{"snapshotCallbacks", func() { _ = c.snapshotCallbacks() }},
		{"robotsKey", func() { _ = robotsKey(u) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tt.f); n != 0 {
				t.Errorf("%s allocates %v times, want 0", tt.name, n)
			}
		})
	}
	if got, want := robotsKey(u).String(), "http://127.0.0.1:8080"; got != want {
		t.Errorf("robotsKey(%q) = %q, want %q", u, got, want)
	}
	for _, tt := range []struct{ in, want string }{
		{"HTTP://Example.COM/x", "http://example.com:80"},
		{"https://example.com/x", "https://example.com:443"},
		{"http://[::1]:81/", "http://[::1]:81"},
		{"http://[::1]/", "http://[::1]:80"},
	} {
		p, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := robotsKey(p).String(); got != tt.want {
			t.Errorf("robotsKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestTransportKeepsIdlePerWorker checks that magpie's own transport keeps an
// idle connection per worker when the workers outnumber its default, and that
// a transport the user set is never retuned.
func TestTransportKeepsIdlePerWorker(t *testing.T) {
	ts := newTestServer(t)
	userTransport := &http.Transport{MaxIdleConnsPerHost: 3}
	tests := []struct {
		name string
		set  func(c *Collector)
		want int
	}{
		{"own transport", func(*Collector) {}, 300},
		{"user transport", func(c *Collector) { c.WithTransport(userTransport) }, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCollector(Workers(300))
			tt.set(c)
			if err := c.Visit(ts.URL + "/leaf"); err != nil {
				t.Fatalf("Visit(/leaf) error = %v, want nil", err)
			}
			tr, ok := c.shared.backend.get().Transport.(*http.Transport)
			if !ok {
				t.Fatalf("transport is %T, want *http.Transport", c.shared.backend.get().Transport)
			}
			if tr.MaxIdleConnsPerHost != tt.want {
				t.Errorf("MaxIdleConnsPerHost = %d, want %d", tr.MaxIdleConnsPerHost, tt.want)
			}
		})
	}
}
