package magpie

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// countChecks counts the admission steps run for c's requests and links
// (see noteCheck) until the test ends.
func countChecks(t *testing.T, c *Collector) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	hook := func(hc *Collector, step string) {
		if hc != c {
			return // another test's crawl, still winding down
		}
		mu.Lock()
		counts[step]++
		mu.Unlock()
	}
	if !checkHook.CompareAndSwap(nil, &hook) {
		t.Fatal("checkHook is set by another test")
	}
	t.Cleanup(func() { checkHook.Store(nil) })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

// linkOutcome is what one Request.Visit of a crawl gave.
type linkOutcome struct {
	err    string
	reason string // the refusal reason err is, "" for nil
}

// onceSite serves a tree of pages /p/0 … /p/n-1 whose every page links to
// its two children (new links), to the root (visited), to a foreign host, to
// a filtered path, to a path robots.txt disallows, with a fragment, and to a
// mailto: address, so that a crawl meets every kind of refusal knownLink
// decides as well as new links.
func onceSite(t *testing.T, n int) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
	})
	mux.HandleFunc("/p/{n}", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || i >= n {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		for _, child := range []int{2*i + 1, 2*i + 2} {
			if child < n {
				fmt.Fprintf(w, `<a href="/p/%d">c</a>`, child)
			}
		}
		fmt.Fprintf(w, `<a href="/p/0">root</a><a href="http://other.invalid/p/%d">foreign</a>`, i)
		fmt.Fprintf(w, `<a href="/skip/%d">filtered</a><a href="/private/%d">robots</a>`, i, i)
		fmt.Fprintf(w, `<a href="/p/0#top">fragment</a><a href="mailto:x@example.com">mail</a>`)
		fmt.Fprintf(w, `<a href="http://%s/p/%d?q=1">query</a>`, r.Host, i)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestLinkCheckedOnce: each link of a crawl is checked (URL, robots.txt) and
// keyed at most once on its way in, whether it ends refused or admitted,
// whether it takes knownLink's way with or without an OnRefused callback
// listening, or the whole way (a visited set knownLink does not look into);
// and all three give every link the same error, count the same refusals,
// use the same request IDs, show OnRefused the same requests and fetch the
// same pages.
func TestLinkCheckedOnce(t *testing.T) {
	const pages = 40
	srv := onceSite(t, pages)
	type result struct {
		outcomes map[string]linkOutcome
		checks   map[string]int
		refused  map[string]uint64
		fetched  []string
		heard    []string // what OnRefused saw
		lastID   uint32
	}
	crawl := func(t *testing.T, listen, wholeWay bool) result {
		c := NewCollector(Async(true), Workers(4), MaxDepth(5), AllowedDomains("127.0.0.1"),
			DisallowedURLFilters(regexp.MustCompile(`/skip/`)))
		if wholeWay {
			if err := c.SetStorage(wrappedStore{&storage.InMemoryStorage{}}); err != nil {
				t.Fatal(err)
			}
		}
		checks := countChecks(t, c)
		var mu sync.Mutex
		res := result{outcomes: map[string]linkOutcome{}}
		c.OnHTML("a[href]", func(e *HTMLElement) {
			href := e.Attr("href")
			err := e.Request.Visit(href)
			o := linkOutcome{}
			if err != nil {
				o = linkOutcome{err: err.Error(), reason: refusalReason(err)}
			}
			mu.Lock()
			defer mu.Unlock()
			res.outcomes[e.Request.URL.RequestURI()+" -> "+href] = o
		})
		c.OnResponse(func(r *Response) {
			mu.Lock()
			defer mu.Unlock()
			res.fetched = append(res.fetched, r.Request.URL.String())
		})
		if listen {
			c.OnRefused(func(r *Request, err error) {
				s := fmt.Sprintf("%s depth %d parent %s: %v", r.URL, r.Depth, r.parentURL, err)
				mu.Lock()
				defer mu.Unlock()
				res.heard = append(res.heard, s)
			})
		}
		if err := c.Visit(srv.URL + "/p/0"); err != nil {
			t.Fatalf("Visit: %v", err)
		}
		c.Wait()
		res.checks, res.refused, res.lastID = checks(), c.Stats().Refused, c.nextID.Load()
		slices.Sort(res.fetched)
		slices.Sort(res.heard)
		return res
	}
	modes := []struct {
		name             string
		listen, wholeWay bool
	}{{"knownLink", false, false}, {"knownLink+OnRefused", true, false}, {"whole way+OnRefused", true, true}}
	got := make([]result, len(modes))
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			r := crawl(t, m.listen, m.wholeWay)
			got[i] = r
			// Each Visit checks its URL once; those that pass, robots.txt
			// once; those that pass that, their key once. The seed too.
			var visits, passURL, passRobots int
			for _, o := range r.outcomes {
				visits++
				if o.reason == RefusedDomain || o.reason == RefusedURLFilter || o.reason == RefusedDepth ||
					o.reason == RefusedScheme {
					continue
				}
				passURL++
				if o.reason == RefusedRobots {
					continue
				}
				passRobots++
			}
			if visits == 0 || len(r.fetched) < pages/2 {
				t.Fatalf("crawl followed %d links and fetched %d pages; the site was not crawled", visits, len(r.fetched))
			}
			want := map[string]int{
				checkURLStep:    visits + 1,
				checkRobotsStep: passURL + 1,
				checkKeyStep:    passRobots + 1,
			}
			for step, n := range want {
				if got := r.checks[step]; got != n {
					t.Errorf("%s ran %d times, want %d (once for the seed and each link that got that far)", step, got, n)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	whole := got[len(got)-1]
	for i, r := range got[:len(got)-1] {
		name := modes[i].name
		if !maps.Equal(r.outcomes, whole.outcomes) {
			for k, o := range r.outcomes {
				if whole.outcomes[k] != o {
					t.Errorf("%s: link %s: %+v, the whole way %+v", name, k, o, whole.outcomes[k])
				}
			}
		}
		if !maps.Equal(r.refused, whole.refused) {
			t.Errorf("%s: Stats().Refused = %v, the whole way %v", name, r.refused, whole.refused)
		}
		if !slices.Equal(r.fetched, whole.fetched) {
			t.Errorf("%s: fetched %v, the whole way %v", name, r.fetched, whole.fetched)
		}
		if r.lastID != whole.lastID {
			t.Errorf("%s: last request ID %d, the whole way %d: a refused link must take the ID its Request would have", name, r.lastID, whole.lastID)
		}
		if modes[i].listen && !slices.Equal(r.heard, whole.heard) {
			t.Errorf("%s: OnRefused saw\n%v\nthe whole way\n%v", name, r.heard, whole.heard)
		}
	}
	for _, reason := range []string{RefusedVisited, RefusedDomain, RefusedURLFilter, RefusedRobots, RefusedDepth} {
		if whole.refused[reason] == 0 {
			t.Errorf("no refusal for %q: the site no longer covers it", reason)
		}
	}
	if len(whole.heard) == 0 {
		t.Error("OnRefused heard nothing")
	}
}

// wrappedStore is the memory store under another type, whose visited set
// knownLink does not look into: its links go the whole way.
type wrappedStore struct{ *storage.InMemoryStorage }

// TestLinkRefusalErrors: a link refused by knownLink returns the error the
// whole way of admission gives, errors.Is-able as before.
func TestLinkRefusalErrors(t *testing.T) {
	srv := onceSite(t, 3)
	c := NewCollector(MaxDepth(2), AllowedDomains("127.0.0.1"), DisallowedURLFilters(regexp.MustCompile(`/skip/`)))
	errs := map[string]error{}
	c.OnResponse(func(r *Response) {
		switch r.Request.URL.Path {
		case "/p/0": // depth 1
			for _, href := range []string{"/p/0", "http://other.invalid/p/0", "/skip/0", "/private/0", "/p/1"} {
				errs[href] = r.Request.Visit(href)
			}
		case "/p/1": // depth 2: its links are too deep
			errs["/p/2"] = r.Request.Visit("/p/2")
		}
	})
	if err := c.Visit(srv.URL + "/p/0"); err != nil {
		t.Fatalf("Visit: %v", err)
	}
	want := map[string]error{
		"http://other.invalid/p/0": ErrForbiddenDomain,
		"/skip/0":                  ErrForbiddenURL,
		"/private/0":               ErrRobotsTxtBlocked,
		"/p/1":                     nil,
		"/p/2":                     ErrMaxDepth,
	}
	for href, w := range want {
		if !errors.Is(errs[href], w) {
			t.Errorf("Visit(%q) error = %v, want %v", href, errs[href], w)
		}
	}
	if av, ok := errors.AsType[*AlreadyVisitedError](errs["/p/0"]); !ok || av.Destination.String() != srv.URL+"/p/0" {
		t.Errorf("Visit(%q) error = %v, want *AlreadyVisitedError for %s", "/p/0", errs["/p/0"], srv.URL+"/p/0")
	}
	wantRefused := map[string]uint64{RefusedDomain: 1, RefusedURLFilter: 1, RefusedRobots: 1, RefusedDepth: 1, RefusedVisited: 1}
	if got := c.Stats().Refused; !maps.Equal(got, wantRefused) {
		t.Errorf("Stats().Refused = %v, want %v", got, wantRefused)
	}
}

// TestNewLinkAllocations: admitting a new link costs a handful of
// allocations: its Request (URL and Headers in the same block), its
// headers and Context, its visited mark and its place in the frontier.
func TestNewLinkAllocations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/">home</a>`)
	}))
	t.Cleanup(srv.Close)
	c := NewCollector(IgnoreRobotsTxt())
	var allocs float64
	var err error
	hrefs := make([]string, 1000)
	for i := range hrefs {
		hrefs[i] = "/n/" + strconv.Itoa(i)
	}
	c.OnHTML("a[href]", func(e *HTMLElement) {
		if e.Request.URL.Path != "/" {
			return
		}
		i := 0
		allocs = testing.AllocsPerRun(200, func() {
			err = e.Request.Visit(hrefs[i])
			i++
		})
	})
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit: %v", err)
	}
	if err != nil {
		t.Fatalf("Visit of a new link: %v", err)
	}
	if allocsCounted(t) && allocs > 5 {
		t.Errorf("admitting a new link: %v allocations, want at most 5", allocs)
	}
}

// BenchmarkVisitKnownLink is Request.Visit of a link knownLink refuses as
// visited, with robots.txt obeyed and nobody listening to refusals: the
// common end of a link in a crawl.
func BenchmarkVisitKnownLink(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\nCrawl-delay: 0.001\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/">home</a>`)
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	c := NewCollector(AllowedDomains("127.0.0.1"))
	c.OnHTML("a[href]", func(e *HTMLElement) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := errors.AsType[*AlreadyVisitedError](e.Request.Visit("/?a=1")); !ok {
				b.Fatal("Visit of a visited page was not refused as visited")
			}
		}
	})
	if err := c.Visit(srv.URL + "/?a=1"); err != nil {
		b.Fatal(err)
	}
}

// TestLinkRobotsPerPage: the robots.txt rules a page's links are tested
// against are looked up once per host and kept for the page, and give each
// link the verdict the whole way gives: the User-Agent's own group, each
// host its own rules (links alternate between hosts), a query tested with
// the path, a host without robots.txt allowing all.
func TestLinkRobotsPerPage(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r) // robots.txt too: everything allowed
	}))
	t.Cleanup(other.Close)
	links := []string{"/bot/1", other.URL + "/bot/1", "/private/1", "/bot/2?q=1", other.URL + "/x", "/ok", "/ok?bot=1", other.URL + "/bot/2"}
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n\nUser-agent: magpiebot\nDisallow: /bot/\nDisallow: /*?bot=\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for _, l := range links {
				fmt.Fprintf(w, `<a href="%s">l</a>`, l)
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	crawl := func(listen bool) map[string]string {
		c := NewCollector(UserAgent("MagpieBot/1.0"))
		checks := countChecks(t, c)
		got := map[string]string{}
		c.OnHTML("a[href]", func(e *HTMLElement) {
			if e.Request.URL.Path != "/" {
				return
			}
			href := e.Attr("href")
			got[href] = fmt.Sprint(e.Request.Visit(href))
		})
		if listen {
			c.OnRefused(func(*Request, error) {})
		}
		if err := c.Visit(srv.URL + "/"); err != nil {
			t.Fatalf("Visit: %v", err)
		}
		if n := checks()[checkRobotsStep]; n != len(links)+1 {
			t.Errorf("OnRefused=%v: robots.txt checked %d times, want %d (the seed and each link once)", listen, n, len(links)+1)
		}
		checkHook.Store(nil)
		return got
	}
	fast, slow := crawl(false), crawl(true)
	blocked := fmt.Sprint(ErrRobotsTxtBlocked)
	for _, l := range links {
		want := "<nil>"
		if l == "/bot/1" || l == "/bot/2?q=1" || l == "/ok?bot=1" {
			want = blocked
		}
		if fast[l] != want || slow[l] != want {
			t.Errorf("Visit(%q) = %s without OnRefused, %s with it; want %s", l, fast[l], slow[l], want)
		}
	}
}

// TestHeardLinkAllocations: with an OnRefused callback listening, a link to
// a visited page is refused with a Request built for it, still the short
// way: the Request block (URL included), its headers and Context, and the
// error; no second URL, no parent URL printed per link.
func TestHeardLinkAllocations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/">home</a>`)
	}))
	t.Cleanup(srv.Close)
	c := NewCollector()
	heard := 0
	c.OnRefused(func(r *Request, err error) {
		if _, ok := errors.AsType[*AlreadyVisitedError](err); ok && r.URL.Path == "/" {
			heard++
		}
	})
	var allocs float64
	c.OnHTML("a[href]", func(e *HTMLElement) {
		allocs = testing.AllocsPerRun(200, func() { _ = e.Request.Visit("/") })
	})
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Fatalf("Visit: %v", err)
	}
	if heard != 201 {
		t.Fatalf("OnRefused heard %d refusals as visited, want 201", heard)
	}
	if allocsCounted(t) && allocs > 4 {
		t.Errorf("refusing a visited link to OnRefused: %v allocations, want at most 4", allocs)
	}
}
