package magpie

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/magpiecrawl/magpie/storage"
)

// TestLyingContentLength: a Content-Length of 1 GiB on a 4-byte body costs a
// small, bounded buffer, not one sized from the header.
func TestLyingContentLength(t *testing.T) {
	h := http.Header{"Content-Length": {"1073741824"}}
	const calls = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range calls {
		body, _, err := readBody(strings.NewReader("tiny"), h, "/", 10<<20)
		if err != nil || string(body) != "tiny" {
			t.Fatalf("readBody = %q, %v", body, err)
		}
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / calls
	if perCall > maxPresize+(64<<10) {
		t.Errorf("readBody allocated %d KiB per response for a lying Content-Length, want at most %d KiB", perCall>>10, (maxPresize+(64<<10))>>10)
	}
}

// TestStackedContentEncodings: more than MaxContentCodings layers are
// refused before any decoder is built; a few layers decode.
func TestStackedContentEncodings(t *testing.T) {
	plain := []byte("<p>hello</p>")
	body := plain
	for range 3 {
		body = gzipBytes(t, body)
	}
	got, _, err := readBody(bytes.NewReader(body), http.Header{"Content-Encoding": {"gzip, gzip", "gzip"}}, "/", 0)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("3 gzip layers: readBody = %q, %v; want %q", got, err, plain)
	}
	const layers = 100
	for range layers - 3 {
		body = gzipBytes(t, body)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err = readBody(bytes.NewReader(body), http.Header{"Content-Encoding": {strings.TrimSuffix(strings.Repeat("gzip,", layers), ",")}}, "/", 10<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooManyEncodings) {
		t.Fatalf("%d gzip layers: error = %v, want ErrTooManyEncodings", layers, err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("refusing %d layers allocated %d KiB, want under 1 MiB", layers, grown>>10)
	}
}

// TestInvalidUTF8Replaced: a page declared UTF-8 with invalid bytes reaches
// callbacks with U+FFFD in their place, as browsers show it.
func TestInvalidUTF8Replaced(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<p>caf\xe9 ok \xff\xfe end</p><p>ünïcode</p>"))
	}))
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt())
	var texts []string
	c.OnHTML("p", func(e *HTMLElement) { texts = append(texts, e.Text) })
	if err := c.Visit(srv.URL); err != nil {
		t.Fatal(err)
	}
	want := []string{"caf\uFFFD ok \uFFFD\uFFFD end", "ünïcode"}
	if len(texts) != 2 || texts[0] != want[0] || texts[1] != want[1] {
		t.Errorf("texts = %q, want %q", texts, want)
	}
	for _, s := range texts {
		if !utf8.ValidString(s) {
			t.Errorf("callback saw invalid UTF-8 %q", s)
		}
	}
}

// TestFileNameCapped: Response.FileName fits in a file system's 255-byte
// name limit, and two long names that differ only at the end stay apart.
func TestFileNameCapped(t *testing.T) {
	long := strings.Repeat("a", 600)
	names := map[string]bool{}
	for _, tail := range []string{"x", "y"} {
		r := &Response{Request: &Request{URL: mustURL(t, "http://h/"+long+tail+"?q="+long)}}
		name := r.FileName()
		if len(name) > 255 {
			t.Errorf("FileName() is %d bytes, want at most 255", len(name))
		}
		names[name] = true
	}
	if len(names) != 2 {
		t.Errorf("two different long URLs gave the same FileName")
	}
	r := &Response{Request: &Request{URL: mustURL(t, "http://h/short.html")}}
	if got := r.FileName(); got != "short.html" {
		t.Errorf("FileName() of a short name = %q, want it unchanged", got)
	}
}

// TestDeeplyNestedHTML: markup nested past x/net/html's 512 open elements
// still reaches OnHTML (flattened, and said so in the Response), as browsers
// render it.
func TestDeeplyNestedHTML(t *testing.T) {
	var page strings.Builder
	page.WriteString("<html><body><a href='/top'>top</a>")
	for range 2000 {
		page.WriteString("<div><span>")
	}
	page.WriteString("<a href='/deep1'>deep</a><p class=x>text</p><a href='/deep2'>deeper</a>")
	for range 2000 {
		page.WriteString("</span></div>")
	}
	page.WriteString("<a href='/bottom'>bottom</a></body></html>")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page.String())
	}))
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt())
	var links []string
	flattened := false
	c.OnHTML("a[href]", func(e *HTMLElement) {
		links = append(links, e.Attr("href"))
		flattened = flattened || e.Response.Flattened
	})
	var texts []string
	c.OnHTML("p.x", func(e *HTMLElement) { texts = append(texts, e.Text) })
	var errs []error
	c.OnError(func(_ *Response, err error) { errs = append(errs, err) })
	if err := c.Visit(srv.URL); err != nil {
		t.Fatalf("Visit error = %v", err)
	}
	if want := []string{"/top", "/deep1", "/deep2", "/bottom"}; strings.Join(links, " ") != strings.Join(want, " ") {
		t.Errorf("links = %v, want %v", links, want)
	}
	if len(texts) != 1 || texts[0] != "text" || !flattened || len(errs) != 0 {
		t.Errorf("texts %v, Flattened %v, errors %v; want [text], true, none", texts, flattened, errs)
	}
}

// TestCookieCaps: a host that sets 2,000 cookies gets at most
// MaxCookiesPerHost back, in a Cookie header of at most MaxCookieHeader
// bytes; an oversized cookie is not kept.
func TestCookieCaps(t *testing.T) {
	var lastHeader string
	var lastCount int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			// net/http itself drops every cookie of a response with more
			// than 3,000 (GODEBUG httpcookiemaxnum); stay under that.
			for i := range 2000 {
				http.SetCookie(w, &http.Cookie{Name: fmt.Sprintf("c%05d", i), Value: strings.Repeat("v", 40), Path: "/"})
			}
			http.SetCookie(w, &http.Cookie{Name: "huge", Value: strings.Repeat("x", MaxCookieSize), Path: "/"})
		case "/read":
			lastHeader = r.Header.Get("Cookie")
			lastCount = len(r.Cookies())
		}
	}))
	defer srv.Close()
	for _, name := range []string{"memory jar", "storage jar"} {
		t.Run(name, func(t *testing.T) {
			c := NewCollector(IgnoreRobotsTxt(), AllowURLRevisit())
			if name == "storage jar" {
				if err := c.SetStorage(&storage.InMemoryStorage{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Visit(srv.URL + "/set"); err != nil {
				t.Fatal(err)
			}
			if err := c.Visit(srv.URL + "/read"); err != nil {
				t.Fatal(err)
			}
			if lastCount == 0 || lastCount > MaxCookiesPerHost || len(lastHeader) > MaxCookieHeader {
				t.Errorf("sent %d cookies in %d bytes, want 1..%d within %d bytes", lastCount, len(lastHeader), MaxCookiesPerHost, MaxCookieHeader)
			}
			if strings.Contains(lastHeader, "huge=") {
				t.Error("an oversized cookie was kept and sent")
			}
			if n := len(c.Cookies(srv.URL)); n > MaxCookiesPerHost {
				t.Errorf("Cookies() = %d, want at most %d", n, MaxCookiesPerHost)
			}
		})
	}
}

// TestDenyPrivateNetworks: with the guard on, a loopback server is refused
// at dial time (typed error, robots.txt included, no retry); an allow-list
// lets it through; a redirect from an allowed address to a refused one is
// refused when the redirect is dialled.
func TestDenyPrivateNetworks(t *testing.T) {
	var hits atomic.Int32
	target, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	other := &httptest.Server{Listener: target, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal")
	})}}
	other.Start()
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/to-internal" {
			http.Redirect(w, r, other.URL+"/secret", http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	t.Run("refused", func(t *testing.T) {
		c := NewCollector(DenyPrivateNetworks(), RetryPolicy(RetryOptions{MaxAttempts: 3}))
		var refused []error
		c.OnRefused(func(_ *Request, err error) { refused = append(refused, err) })
		err := c.Visit(srv.URL + "/")
		var be *BlockedAddressError
		if !errors.Is(err, ErrPrivateNetwork) || !errors.As(err, &be) || be.Addr != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("Visit(loopback) error = %v, want a *BlockedAddressError for 127.0.0.1", err)
		}
		if len(refused) != 1 || c.Stats().Refused[RefusedPrivateNetwork] != 1 {
			t.Errorf("OnRefused got %v, Stats %v; want one private_network refusal", refused, c.Stats().Refused)
		}
	})
	t.Run("allow-list and redirect", func(t *testing.T) {
		c := NewCollector(DenyPrivateNetworks(netip.MustParsePrefix("127.0.0.1/32")))
		if err := c.Visit(srv.URL + "/"); err != nil {
			t.Fatalf("Visit(allowed loopback) error = %v", err)
		}
		if err := c.Visit(srv.URL + "/to-internal"); !errors.Is(err, ErrPrivateNetwork) {
			t.Errorf("Visit(redirect to 127.0.0.2) error = %v, want ErrPrivateNetwork", err)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the refused address was reached %d times", n)
		}
	})
	t.Run("a transport set later is guarded too", func(t *testing.T) {
		c := NewCollector(DenyPrivateNetworks())
		c.WithTransport(&http.Transport{})
		if err := c.Visit(srv.URL + "/"); !errors.Is(err, ErrPrivateNetwork) {
			t.Errorf("Visit with a new transport error = %v, want ErrPrivateNetwork", err)
		}
	})
}

// TestCredentialsScopedToStartHosts: Authorization, Cookie and
// Proxy-Authorization set by the user (default headers, OnRequest) reach the
// host the crawl was started on, not a host a page links to, unless that
// host is named with CredentialHosts.
func TestCredentialsScopedToStartHosts(t *testing.T) {
	type seen struct{ auth, cookie, proxy string }
	var mu sync.Mutex
	got := map[string]seen{}
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name+r.URL.Path] = seen{r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Header.Get("Proxy-Authorization")}
			mu.Unlock()
		}
	}
	other := httptest.NewServer(record("other"))
	defer other.Close()
	start := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<a href="/inside">in</a><a href="%s/outside">out</a>`, other.URL)
		}
		record("start")(w, r)
	}))
	defer start.Close()

	for _, named := range []bool{false, true} {
		mu.Lock()
		clear(got)
		mu.Unlock()
		opts := []CollectorOption{IgnoreRobotsTxt(), Headers(map[string]string{"Authorization": "Bearer secret"})}
		if named {
			opts = append(opts, CredentialHosts(mustURL(t, other.URL).Host))
		}
		c := NewCollector(opts...)
		c.OnRequest(func(r *Request) {
			r.Headers.Set("Cookie", "session=s")
			r.Headers.Set("Proxy-Authorization", "Basic p")
		})
		c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		if err := c.Visit(start.URL + "/"); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		full := seen{"Bearer secret", "session=s", "Basic p"}
		for _, p := range []string{"start/", "start/inside"} {
			if got[p] != full {
				t.Errorf("CredentialHosts named=%v: %s got %+v, want %+v", named, p, got[p], full)
			}
		}
		want := seen{}
		if named {
			want = full
		}
		if got["other/outside"] != want {
			t.Errorf("CredentialHosts named=%v: the linked host got %+v, want %+v", named, got["other/outside"], want)
		}
		mu.Unlock()
	}
}
