package magpie

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeFetcher serves the paths under /js/ itself, with a page whose links are
// only in its "rendered" form, and records what it was asked.
type fakeFetcher struct {
	mu      sync.Mutex // guards cookies, fetched
	cookies map[string][]*http.Cookie
	fetched []string
	fail    error
	panics  bool
	idles   atomic.Int32
	active  atomic.Int32
	sawIdle atomic.Bool // Idle ran while a Fetch was in flight
}

func (f *fakeFetcher) Selects(req *Request) bool { return strings.HasPrefix(req.URL.Path, "/js/") }

func (f *fakeFetcher) Fetch(ctx context.Context, fr *FetchRequest) (*FetchResult, error) {
	f.active.Add(1)
	defer f.active.Add(-1)
	f.mu.Lock()
	f.fetched = append(f.fetched, fr.URL.Path)
	f.cookies = map[string][]*http.Cookie{fr.URL.Path: fr.Cookies}
	f.mu.Unlock()
	if f.panics {
		panic("fetcher bug")
	}
	if f.fail != nil {
		return nil, f.fail
	}
	if fr.Method != http.MethodGet || fr.Header.Get("User-Agent") == "" {
		return nil, errors.New("bad request")
	}
	fr.Sent(time.Now())
	h := http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"gzip"}}
	body := `<html><body><a href="/leaf?from=js">rendered</a></body></html>`
	final := *fr.URL
	final.Path += "/final"
	return &FetchResult{StatusCode: 200, Header: h, Body: []byte(body), FinalURL: &final,
		Cookies: []*http.Cookie{{Name: "rendered", Value: "yes", Path: "/"}}}, nil
}

func (f *fakeFetcher) Idle() {
	f.idles.Add(1)
	if f.active.Load() != 0 {
		f.sawIdle.Store(true)
	}
}

func (f *fakeFetcher) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.fetched...)
}

// TestFetcher: the requests the Fetcher selects go to it and the rest over
// HTTP; its page reaches OnHTML, whose links are crawled; cookies go both
// ways; its errors and panics reach OnError once; Idle runs once the crawl
// has stopped, before Wait returns.
func TestFetcher(t *testing.T) {
	ts := newTestServer(t)
	t.Run("pages", func(t *testing.T) {
		for _, async := range []bool{false, true} {
			ff := &fakeFetcher{}
			c := NewCollector(Async(async), IgnoreRobotsTxt(), WithFetcher(ff))
			if err := c.SetCookies(ts.URL+"/js/page", []*http.Cookie{{Name: "jar", Value: "1"}}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []string
			var finalURL string
			c.OnHTML("a[href]", func(e *HTMLElement) {
				mu.Lock()
				seen = append(seen, e.Attr("href"))
				if e.Request.URL.Path == "/js/page/final" {
					finalURL = e.Request.URL.String()
				}
				mu.Unlock()
				_ = e.Request.Visit(e.Attr("href"))
			})
			c.OnResponseHeaders(func(r *Response) {
				if r.Headers.Get("Content-Encoding") != "" {
					t.Errorf("OnResponseHeaders sees Content-Encoding %q for a fetched page", r.Headers.Get("Content-Encoding"))
				}
			})
			if err := c.Visit(ts.URL + "/js/page"); err != nil {
				t.Fatalf("Visit() error = %v", err)
			}
			c.Wait()
			if got := ff.paths(); len(got) != 1 || got[0] != "/js/page" {
				t.Errorf("fetched %v, want [/js/page]", got)
			}
			if n := ts.count("/js/page"); n != 0 {
				t.Errorf("server saw /js/page %d times, want 0 (the Fetcher took it)", n)
			}
			if n := ts.count("/leaf"); n != 1 {
				t.Errorf("server saw /leaf %d times, want 1 (a link of the fetched page, over HTTP)", n)
			}
			if finalURL == "" {
				t.Errorf("no OnHTML for the fetched page at its final URL; hrefs seen %v", seen)
			}
			ff.mu.Lock()
			jar := ff.cookies["/js/page"]
			ff.mu.Unlock()
			if len(jar) != 1 || jar[0].Name != "jar" {
				t.Errorf("FetchRequest.Cookies = %v, want the jar's cookie", jar)
			}
			if got := c.Cookies(ts.URL + "/js/page/final"); len(got) == 0 || got[len(got)-1].Value == "" {
				t.Errorf("jar cookies after the fetch = %v, want rendered=yes", got)
			}
			if n := ff.idles.Load(); n != 1 {
				t.Errorf("Idle called %d times by the time Wait returned, want 1", n)
			}
			if ff.sawIdle.Load() {
				t.Error("Idle called while a Fetch was in flight")
			}
			ts.mu.Lock()
			ts.hits = map[string]int{}
			ts.mu.Unlock()
		}
	})
	t.Run("errors", func(t *testing.T) {
		boom := errors.New("boom")
		for _, ff := range []*fakeFetcher{{fail: boom}, {panics: true}} {
			c := NewCollector(Async(), IgnoreRobotsTxt(), WithFetcher(ff))
			var errs []error
			var mu sync.Mutex
			c.OnError(func(_ *Response, err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			})
			_ = c.Visit(ts.URL + "/js/x")
			c.Wait()
			if len(errs) != 1 {
				t.Fatalf("OnError called %d times, want 1", len(errs))
			}
			if ff.panics && !errors.Is(errs[0], ErrCallbackPanic) || !ff.panics && !errors.Is(errs[0], boom) {
				t.Errorf("OnError err = %v", errs[0])
			}
		}
	})
	t.Run("http stays", func(t *testing.T) {
		ff := &fakeFetcher{}
		c := NewCollector(IgnoreRobotsTxt(), WithFetcher(ff))
		_ = c.Post(ts.URL+"/js/post", map[string]string{"a": "b"}) // a 404 is fine: it went over HTTP
		if got := ff.paths(); len(got) != 0 {
			t.Errorf("a POST went to the Fetcher: %v", got)
		}
		if n := ts.count("/js/post"); n != 1 {
			t.Errorf("server saw the POST %d times, want 1", n)
		}
		if n := ff.idles.Load(); n != 0 {
			t.Errorf("Idle called %d times for a crawl that never used the Fetcher, want 0", n)
		}
	})
	t.Run("stop", func(t *testing.T) {
		block := make(chan struct{})
		entered := make(chan struct{}, 1)
		bf := &blockingFetcher{entered: entered, release: block}
		c := NewCollector(Async(), IgnoreRobotsTxt(), WithFetcher(bf))
		_ = c.Visit(ts.URL + "/js/slow")
		<-entered
		c.Stop()
		close(block)
		if n := bf.idles.Load(); n != 1 {
			t.Errorf("Idle called %d times by the time Stop returned, want 1", n)
		}
		if bf.ctxErr.Load() == nil {
			t.Error("Fetch's context was not cancelled by Stop")
		}
	})
}

// blockingFetcher blocks in Fetch until its context ends.
type blockingFetcher struct {
	entered chan struct{}
	release chan struct{}
	idles   atomic.Int32
	ctxErr  atomic.Pointer[error]
}

func (b *blockingFetcher) Selects(*Request) bool { return true }
func (b *blockingFetcher) Idle()                 { b.idles.Add(1) }
func (b *blockingFetcher) Fetch(ctx context.Context, fr *FetchRequest) (*FetchResult, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	err := ctx.Err()
	b.ctxErr.Store(&err)
	return nil, err
}

// TestFetcherCookieRoundTrip: a cookie the Fetcher brings back is sent by a
// later HTTP request.
func TestFetcherCookieRoundTrip(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ck, err := r.Cookie("rendered"); err == nil {
			got.Store(ck.Value)
		}
	}))
	t.Cleanup(ts.Close)
	ff := &fakeFetcher{}
	c := NewCollector(IgnoreRobotsTxt(), WithFetcher(ff))
	if err := c.Visit(ts.URL + "/js/page"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	if err := c.Visit(ts.URL + "/plain"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	if v, _ := got.Load().(string); v != "yes" {
		t.Errorf("HTTP request after the fetch sent rendered=%q, want yes", v)
	}
}
