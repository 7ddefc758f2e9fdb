package magpie

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// changingSite serves pages from a map that a test edits between crawls;
// with validators it answers conditional requests (http.ServeContent), and
// without them it strips ETag and Last-Modified and ignores If-*.
type changingSite struct {
	*httptest.Server
	validators  bool
	mu          sync.Mutex
	pages       map[string]string
	modified    map[string]time.Time
	conditional map[string]int // requests that carried If-None-Match or If-Modified-Since
	notModified int
}

func newChangingSite(t *testing.T, validators bool, pages map[string]string) *changingSite {
	t.Helper()
	s := &changingSite{validators: validators, pages: pages, modified: map[string]time.Time{}, conditional: map[string]int{}}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for p := range pages {
		s.modified[p] = base
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *changingSite) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, ok := s.pages[r.URL.Path]
	mod := s.modified[r.URL.Path]
	if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
		s.conditional[r.URL.Path]++
	}
	s.mu.Unlock()
	if r.URL.Path == "/robots.txt" || !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if !s.validators {
		_, _ = w.Write([]byte(body))
		return
	}
	w.Header().Set("ETag", `"`+strings.TrimPrefix(r.URL.Path, "/")+"-"+mod.Format("150405")+`"`)
	rec := &statusRecorder{ResponseWriter: w}
	http.ServeContent(rec, r, "", mod, strings.NewReader(body))
	if rec.status == http.StatusNotModified {
		s.mu.Lock()
		s.notModified++
		s.mu.Unlock()
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// edit changes, adds (body != "") or deletes (body == "") a page.
func (s *changingSite) edit(path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body == "" {
		delete(s.pages, path)
		return
	}
	s.pages[path] = body
	s.modified[path] = s.modified[path].Add(time.Hour).Add(24 * time.Hour)
	if s.modified[path].Year() < 2025 {
		s.modified[path] = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	}
}

func links(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		b.WriteString(`<a href="` + p + `">` + p + `</a>`)
	}
	return "<html><body>" + b.String() + "</body></html>"
}

// recrawlOutcomes crawls site from / with a new Collector over store and
// returns each page's Change by path, the stats, and the refusals by path.
func recrawlOutcomes(t *testing.T, site *changingSite, store storage.Storage, p RecrawlPolicy) (map[string]Change, Stats, map[string]error) {
	t.Helper()
	c := NewCollector(Recrawl(p))
	if err := c.SetStorage(store); err != nil {
		t.Fatalf("SetStorage error = %v", err)
	}
	var mu sync.Mutex
	got, refused := map[string]Change{}, map[string]error{}
	note := func(r *Response) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[r.Request.URL.Path]; dup {
			t.Errorf("%s answered twice in one crawl", r.Request.URL.Path)
		}
		got[r.Request.URL.Path] = r.Change
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnScraped(note)
	c.OnError(func(r *Response, err error) {
		if r.Change != ChangeGone {
			t.Errorf("OnError(%s) = %v with Change %v, want only gone pages to fail", r.Request.URL, err, r.Change)
		}
		note(r)
	})
	c.OnRefused(func(r *Request, err error) {
		mu.Lock()
		refused[r.URL.Path] = err
		mu.Unlock()
	})
	if err := c.Visit(site.URL + "/"); err != nil {
		t.Fatalf("Visit(/) error = %v", err)
	}
	c.Wait()
	return got, c.Stats(), refused
}

func sameChanges(t *testing.T, what string, got, want map[string]Change) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s Change = %q, want %q", what, p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s fetched (Change %q), want not fetched", what, p, g)
		}
	}
}

// TestRecrawl crawls a site, changes it, and crawls it again over the same
// store: with validators (304s, no bodies) and without (digests), each page
// must end as new, changed, unchanged or gone, a page linked from nowhere
// any more is still revisited (due, from the store), and a third crawl with
// a long MinInterval revisits only the start URL.
func TestRecrawl(t *testing.T) {
	for _, validators := range []bool{true, false} {
		name := map[bool]string{true: "validators", false: "digest"}[validators]
		t.Run(name, func(t *testing.T) {
			site := newChangingSite(t, validators, map[string]string{
				"/":  links("/a", "/b", "/c", "/d"),
				"/a": "<p>a</p>", "/b": "<p>b</p>", "/c": "<p>c</p>", "/d": "<p>d</p>",
			})
			store := &storage.InMemoryStorage{}
			first, st1, _ := recrawlOutcomes(t, site, store, RecrawlPolicy{})
			sameChanges(t, "first crawl", first, map[string]Change{"/": ChangeNew, "/a": ChangeNew, "/b": ChangeNew, "/c": ChangeNew, "/d": ChangeNew})
			if st1.Recrawl != (RecrawlStats{New: 5}) {
				t.Errorf("first crawl Stats.Recrawl = %+v, want 5 new", st1.Recrawl)
			}

			site.edit("/", links("/a", "/b", "/c", "/e")) // /d is linked from nowhere now
			site.edit("/b", "<p>b, edited</p>")
			site.edit("/c", "")
			site.edit("/e", "<p>e</p>")
			second, st2, _ := recrawlOutcomes(t, site, store, RecrawlPolicy{})
			sameChanges(t, "second crawl", second, map[string]Change{
				"/": ChangeChanged, "/a": ChangeUnchanged, "/b": ChangeChanged, "/c": ChangeGone, "/d": ChangeUnchanged, "/e": ChangeNew})
			if want := (RecrawlStats{New: 1, Changed: 2, Unchanged: 2, Gone: 1}); st2.Recrawl != want {
				t.Errorf("second crawl Stats.Recrawl = %+v, want %+v", st2.Recrawl, want)
			}
			site.mu.Lock()
			conditionalA, notModified := site.conditional["/a"], site.notModified
			site.mu.Unlock()
			if validators {
				if conditionalA != 1 || notModified != 2 {
					t.Errorf("second crawl: /a sent %d conditional requests, server sent %d 304s; want 1 and 2 (/a, /d)", conditionalA, notModified)
				}
				// Only the changed and new pages' bodies came back, and the 404's.
				want := len(links("/a", "/b", "/c", "/e")) + len("<p>b, edited</p>") + len("<p>e</p>") + len("404 page not found\n")
				if st2.Bytes != uint64(want) {
					t.Errorf("second crawl Stats.Bytes = %d, want %d (304s carry no body)", st2.Bytes, want)
				}
			} else if conditionalA != 0 {
				t.Errorf("second crawl without validators sent %d conditional requests for /a, want 0", conditionalA)
			}

			// Everything was just fetched: with a long MinInterval only the
			// start URL is fetched again, and its links are not due. (A 304
			// has no body, so with validators no link is found at all.)
			third, st3, refused := recrawlOutcomes(t, site, store, RecrawlPolicy{MinInterval: time.Hour})
			sameChanges(t, "third crawl", third, map[string]Change{"/": ChangeUnchanged})
			if validators {
				if len(refused) != 0 {
					t.Errorf("third crawl refused %v, want nothing (the 304 has no links)", refused)
				}
				return
			}
			for _, p := range []string{"/a", "/b", "/e"} {
				err := refused[p]
				if !errors.Is(err, ErrNotDue) {
					t.Errorf("third crawl: link %s refused with %v, want ErrNotDue", p, err)
				}
				if _, ok := errors.AsType[*AlreadyVisitedError](err); !ok {
					t.Errorf("third crawl: link %s refusal %v does not wrap *AlreadyVisitedError", p, err)
				}
			}
			if st3.Refused[RefusedNotDue] != 4 {
				t.Errorf("third crawl Stats.Refused[not_due] = %d, want 4 (/a /b /c /e)", st3.Refused[RefusedNotDue])
			}
		})
	}
}

// TestRecrawlSchedule checks the adaptive interval: it grows by 40% while
// unchanged, shrinks by 20% when changed, doubles when gone, and stays
// within the policy's bounds.
func TestRecrawlSchedule(t *testing.T) {
	p := RecrawlPolicy{MinInterval: time.Hour, MaxInterval: 2 * time.Hour}
	for _, tt := range []struct {
		known bool
		cur   time.Duration
		ch    Change
		want  time.Duration
	}{
		{false, 0, ChangeNew, time.Hour},
		{true, time.Hour, ChangeUnchanged, 84 * time.Minute},
		{true, 100 * time.Minute, ChangeChanged, 80 * time.Minute},
		{true, 70 * time.Minute, ChangeChanged, time.Hour},
		{true, 100 * time.Minute, ChangeUnchanged, 2 * time.Hour},
		{true, 70 * time.Minute, ChangeGone, 2 * time.Hour},
		{true, 0, ChangeUnchanged, 84 * time.Minute},
	} {
		if got := nextInterval(p, tt.known, tt.cur, tt.ch); got != tt.want {
			t.Errorf("nextInterval(known %v, %v, %v) = %v, want %v", tt.known, tt.cur, tt.ch, got, tt.want)
		}
	}
}

// TestRecrawlUnsupported: a Colly-style storage without page state still
// crawls under Recrawl, and DueURLs and MarkDue say why they cannot work.
func TestRecrawlUnsupported(t *testing.T) {
	site := newChangingSite(t, true, map[string]string{"/": "<p>x</p>"})
	c := NewCollector(Recrawl(RecrawlPolicy{}))
	if err := c.SetStorage(&collyOnlyStorage{}); err != nil {
		t.Fatal(err)
	}
	var change Change = 99
	c.OnScraped(func(r *Response) { change = r.Change })
	if err := c.Visit(site.URL + "/"); err != nil {
		t.Fatalf("Visit error = %v", err)
	}
	if change != ChangeNone {
		t.Errorf("Change without a PageStore = %v, want ChangeNone", change)
	}
	if err := c.MarkDue(site.URL + "/"); !errors.Is(err, ErrRecrawlUnsupported) {
		t.Errorf("MarkDue error = %v, want ErrRecrawlUnsupported", err)
	}
	for _, err := range c.DueURLs(t.Context()) {
		if !errors.Is(err, ErrRecrawlUnsupported) {
			t.Errorf("DueURLs error = %v, want ErrRecrawlUnsupported", err)
		}
	}
}

// collyOnlyStorage has only Colly's Storage methods.
type collyOnlyStorage struct {
	mu      sync.Mutex
	visited map[uint64]bool
}

func (s *collyOnlyStorage) Init() error { return nil }
func (s *collyOnlyStorage) Visited(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.visited == nil {
		s.visited = map[uint64]bool{}
	}
	s.visited[id] = true
	return nil
}
func (s *collyOnlyStorage) IsVisited(id uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.visited[id], nil
}
func (s *collyOnlyStorage) Cookies(*url.URL) string     { return "" }
func (s *collyOnlyStorage) SetCookies(*url.URL, string) {}

// TestRecrawlSitemapLastmod: a sitemap <lastmod> newer than a page's last
// fetch makes the page due at once, within MinInterval; an older one does
// not, and the page is refused as not due.
func TestRecrawlSitemapLastmod(t *testing.T) {
	site := newChangingSite(t, true, map[string]string{"/": links("/a"), "/a": "<p>a</p>"})
	store := &storage.InMemoryStorage{}
	p := RecrawlPolicy{MinInterval: time.Hour}
	if got, _, _ := recrawlOutcomes(t, site, store, p); got["/a"] != ChangeNew {
		t.Fatalf("first crawl: /a %q, want new", got["/a"])
	}
	for _, tt := range []struct {
		lastmod string
		want    Change // ChangeNone: not fetched
	}{
		{"2020-01-01", ChangeNone},
		{time.Now().Add(time.Hour).UTC().Format(time.RFC3339), ChangeUnchanged},
	} {
		site.edit("/sitemap.xml", `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>`+
			site.URL+`/a</loc><lastmod>`+tt.lastmod+`</lastmod></url></urlset>`)
		c := NewCollector(Recrawl(p))
		if err := c.SetStorage(store); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[string]Change{}
		var refusal error
		c.OnScraped(func(r *Response) {
			mu.Lock()
			got[r.Request.URL.Path] = r.Change
			mu.Unlock()
		})
		c.OnRefused(func(r *Request, err error) {
			if r.URL.Path == "/a" {
				mu.Lock()
				refusal = err
				mu.Unlock()
			}
		})
		if err := c.VisitSitemap(site.URL + "/sitemap.xml"); err != nil {
			t.Fatalf("VisitSitemap error = %v", err)
		}
		c.Wait()
		mu.Lock()
		ch, fetched := got["/a"]
		mu.Unlock()
		switch {
		case tt.want == ChangeNone && (fetched || !errors.Is(refusal, ErrNotDue)):
			t.Errorf("lastmod %s, older than the fetch: /a fetched %v (%q), refused with %v; want refused as not due", tt.lastmod, fetched, ch, refusal)
		case tt.want != ChangeNone && ch != tt.want:
			t.Errorf("lastmod %s, newer than the fetch: /a %q (fetched %v), want %q", tt.lastmod, ch, fetched, tt.want)
		}
	}
}

// outcome is what one crawl said of a page: its Change, whether it went to
// OnError, and the depth OnRequest and the response saw.
type outcome struct {
	change          Change
	failed          bool
	reqDepth, depth int
}

// crawlOutcomes crawls from start with a new Collector over store, following
// links, and returns what each page ended as, by path, with the stats.
func crawlOutcomes(t *testing.T, start string, store storage.Storage, opts ...CollectorOption) (map[string]outcome, Stats) {
	t.Helper()
	c := NewCollector(opts...)
	if err := c.SetStorage(store); err != nil {
		t.Fatalf("SetStorage error = %v", err)
	}
	var mu sync.Mutex
	got, reqDepth := map[string]outcome{}, map[string]int{}
	c.OnRequest(func(r *Request) {
		mu.Lock()
		reqDepth[r.URL.Path] = r.Depth
		mu.Unlock()
	})
	note := func(r *Response, failed bool) {
		mu.Lock()
		defer mu.Unlock()
		p := r.Request.URL.Path
		got[p] = outcome{change: r.Change, failed: failed, reqDepth: reqDepth[p], depth: r.Request.Depth}
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	c.OnScraped(func(r *Response) { note(r, false) })
	c.OnError(func(r *Response, _ error) { note(r, true) })
	if err := c.Visit(start); err != nil {
		t.Fatalf("Visit(%s) error = %v", start, err)
	}
	c.Wait()
	return got, c.Stats()
}

// TestRecrawlNeverExisted (issue 40): gone is a page that answered 2xx and
// no longer does. A URL that answered 404 on its first fetch and again on
// the next crawl is a failure both times, with no Change, and not counted
// as gone; a page that was there and went stays gone while it answers 404;
// and a URL that only failed before is new when it first answers 200.
func TestRecrawlNeverExisted(t *testing.T) {
	site := newChangingSite(t, true, map[string]string{"/": links("/a", "/missing"), "/a": "<p>a</p>"})
	store := &storage.InMemoryStorage{}
	policy := Recrawl(RecrawlPolicy{})
	missing := outcome{change: ChangeNone, failed: true}
	for i, step := range []struct {
		edit         func()
		wantA, wantM outcome
		wantStats    RecrawlStats
	}{
		{func() {}, outcome{change: ChangeNew}, missing, RecrawlStats{New: 2}},
		{func() {}, outcome{change: ChangeUnchanged}, missing, RecrawlStats{Unchanged: 2}},
		{func() { site.edit("/a", "") }, outcome{change: ChangeGone, failed: true}, missing, RecrawlStats{Unchanged: 1, Gone: 1}},
		{func() { site.edit("/missing", "<p>here now</p>") }, outcome{change: ChangeGone, failed: true}, outcome{change: ChangeNew}, RecrawlStats{New: 1, Unchanged: 1, Gone: 1}},
	} {
		step.edit()
		got, st := crawlOutcomes(t, site.URL+"/", store, policy)
		for p, want := range map[string]outcome{"/a": step.wantA, "/missing": step.wantM} {
			g := got[p]
			if g.change != want.change || g.failed != want.failed {
				t.Errorf("crawl %d: %s Change %q (OnError %v), want %q (OnError %v)", i+1, p, g.change, g.failed, want.change, want.failed)
			}
		}
		if st.Recrawl != step.wantStats {
			t.Errorf("crawl %d: Stats.Recrawl = %+v, want %+v", i+1, st.Recrawl, step.wantStats)
		}
	}
}

// TestRecrawlDepth (issue 40): a page revisited from the store, not reached
// by a link of this crawl (the start answered 304, so none was found),
// keeps the depth its crawl found it at, in OnRequest and after, and a new
// link on it is one deeper; a start URL is at depth 1 wherever an earlier
// crawl found it.
func TestRecrawlDepth(t *testing.T) {
	site := newChangingSite(t, true, map[string]string{"/": links("/a"), "/a": links("/b"), "/b": "<p>b</p>"})
	store := &storage.InMemoryStorage{}
	policy := Recrawl(RecrawlPolicy{})
	for _, step := range []struct {
		name, start string
		edit        func()
		want        map[string]int
	}{
		{"first crawl", "/", func() {}, map[string]int{"/": 1, "/a": 2, "/b": 3}},
		{"recrawl", "/", func() { site.edit("/a", links("/b", "/c")); site.edit("/c", "<p>c</p>") },
			map[string]int{"/": 1, "/a": 2, "/b": 3, "/c": 3}},
		{"recrawl from /b", "/b", func() {}, map[string]int{"/": 1, "/a": 2, "/b": 1, "/c": 3}},
	} {
		step.edit()
		got, _ := crawlOutcomes(t, site.URL+step.start, store, policy)
		for p, want := range step.want {
			if g := got[p]; g.depth != want || g.reqDepth != want {
				t.Errorf("%s: %s at depth %d (OnRequest saw %d), want %d", step.name, p, g.depth, g.reqDepth, want)
			}
		}
	}
}

// TestNotModifiedWithoutValidator (issue 40): a 304 to a request that
// carried no validator is the server's error (OnError), and, as after a
// 503, the page is fetched again by a later crawl over the same store
// instead of being refused as visited; a 304 to a validator the caller
// sent is an answer, and the page stays visited.
func TestNotModifiedWithoutValidator(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNotModified)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		name, path  string
		validator   bool
		opts        []CollectorOption
		wantFetches int
	}{
		{"503", "/busy", false, nil, 2},
		{"304 unasked", "/n", false, nil, 2},
		{"304 unasked, recrawl", "/nr", false, []CollectorOption{Recrawl(RecrawlPolicy{})}, 2},
		{"304 asked", "/v", true, nil, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := &storage.InMemoryStorage{}
			for i := range 2 {
				c := NewCollector(tt.opts...)
				if err := c.SetStorage(store); err != nil {
					t.Fatal(err)
				}
				if tt.validator {
					c.OnRequest(func(r *Request) { r.Headers.Set("If-None-Match", `"x"`) })
				}
				err := c.Visit(srv.URL + tt.path)
				_, refused := errors.AsType[*AlreadyVisitedError](err)
				_, failed := errors.AsType[*HTTPError](err)
				if wantRefused := i == 1 && tt.wantFetches == 1; refused != wantRefused || !refused && !failed {
					t.Errorf("crawl %d: Visit error = %v, want refused as visited %v, else an *HTTPError", i+1, err, wantRefused)
				}
			}
			mu.Lock()
			n := hits[tt.path]
			mu.Unlock()
			if n != tt.wantFetches {
				t.Errorf("%s fetched %d times by two crawls over one store, want %d", tt.path, n, tt.wantFetches)
			}
		})
	}
}

// TestRecrawlFailedFirstFetch (issue 40): a page whose first fetch the
// server failed (a 503, a 304 to a request with no validator) is tried
// again by the next recrawl even when no link leads there any more (its
// parent answered 304, so no link was found), and is new when it answers.
func TestRecrawlFailedFirstFetch(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	fixed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		ok := fixed
		mu.Unlock()
		switch {
		case r.URL.Path == "/":
			w.Header().Set("ETag", `"root"`)
			http.ServeContent(w, r, "", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), strings.NewReader(links("/n", "/busy")))
		case ok && (r.URL.Path == "/n" || r.URL.Path == "/busy"):
			_, _ = w.Write([]byte("<p>here</p>"))
		case r.URL.Path == "/n":
			w.WriteHeader(http.StatusNotModified)
		case r.URL.Path == "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	store := &storage.InMemoryStorage{}
	policy := Recrawl(RecrawlPolicy{})
	failed := outcome{change: ChangeNone, failed: true}
	for i, want := range []map[string]outcome{
		{"/": {change: ChangeNew}, "/n": failed, "/busy": failed},
		{"/": {change: ChangeUnchanged}, "/n": failed, "/busy": failed},
		{"/": {change: ChangeUnchanged}, "/n": {change: ChangeNew}, "/busy": {change: ChangeNew}},
	} {
		if i == 2 {
			mu.Lock()
			fixed = true
			mu.Unlock()
		}
		got, _ := crawlOutcomes(t, srv.URL+"/", store, policy)
		for p, w := range want {
			if g, ok := got[p]; !ok || g.change != w.change || g.failed != w.failed {
				t.Errorf("crawl %d: %s fetched %v, Change %q (OnError %v), want Change %q (OnError %v)", i+1, p, ok, g.change, g.failed, w.change, w.failed)
			}
		}
		mu.Lock()
		n, b := hits["/n"], hits["/busy"]
		mu.Unlock()
		if n != i+1 || b != i+1 {
			t.Errorf("after crawl %d: /n fetched %d times, /busy %d, want %d each", i+1, n, b, i+1)
		}
	}
}
