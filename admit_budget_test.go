package magpie_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/sqlitestore"
)

// budgetSite is one host of a budget test: / links to /p/0 … /p/n-1,
// which link nowhere, so that which links a budget refuses does not depend
// on the order pages are fetched in. It counts the requests of each path
// (robots.txt: 404, not counted).
type budgetSite struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newBudgetSite(t *testing.T, n int) *budgetSite {
	t.Helper()
	s := &budgetSite{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// fetched is the number of requests the site served.
func (s *budgetSite) fetched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.hits {
		n += v
	}
	return n
}

func (s *budgetSite) host(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// budgetSpy counts the refusals of a crawl by reason and OnError calls.
type budgetSpy struct {
	mu      sync.Mutex
	refused map[string]int
	errs    []error
}

func newBudgetSpy(c *magpie.Collector) *budgetSpy {
	s := &budgetSpy{refused: map[string]int{}}
	c.OnRefused(func(_ *magpie.Request, err error) {
		key := err.Error()
		if errors.Is(err, magpie.ErrMaxRequestsPerHost) {
			key = "host budget"
		}
		s.mu.Lock()
		s.refused[key]++
		s.mu.Unlock()
	})
	c.OnError(func(_ *magpie.Response, err error) {
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
	})
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	return s
}

// budgetCrawl runs a crawl of starts with c in one of the ways a crawl
// runs: "sync" and "async" Visits, or a queue run over the memory queue or
// a SQLite store.
func budgetCrawl(t *testing.T, mode string, c *magpie.Collector, starts ...string) {
	t.Helper()
	switch mode {
	case "sync", "async":
		for _, u := range starts {
			if err := c.Visit(u + "/"); err != nil {
				t.Fatalf("Visit(%s/) error = %v", u, err)
			}
		}
		c.Wait()
	case "queue", "queue-sqlite":
		var q *queue.Queue
		var err error
		if mode == "queue" {
			q, err = queue.New(4, nil)
		} else {
			store, oerr := sqlitestore.Open(filepath.Join(t.TempDir(), "crawl.db"))
			if oerr != nil {
				t.Fatal(oerr)
			}
			t.Cleanup(func() { _ = store.Close() })
			if err := c.SetStorage(store); err != nil {
				t.Fatal(err)
			}
			q, err = queue.New(4, store)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range starts {
			if err := q.AddURL(u + "/"); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Run(c); err != nil {
			t.Fatalf("Run() error = %v", err)
		}
		if n, err := q.Size(); err != nil || n != 0 {
			t.Errorf("queue holds %d entries after the run (err %v), want 0: the refused ones are not kept", n, err)
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// Issue 39 point 3: MaxRequestsPerHost(5) on a crawl of 3 hosts of 10
// pages each fetches exactly 5 pages of each host, and refuses each of the
// other links once, through OnRefused, with ErrMaxRequestsPerHost, counted
// in Stats().Refused["host_budget"]; in every way a crawl runs.
func TestMaxRequestsPerHost(t *testing.T) {
	for _, mode := range []string{"sync", "async", "queue", "queue-sqlite"} {
		t.Run(mode, func(t *testing.T) {
			sites := []*budgetSite{newBudgetSite(t, 9), newBudgetSite(t, 9), newBudgetSite(t, 9)}
			c := magpie.NewCollector(magpie.MaxRequestsPerHost(5), magpie.Async(mode == "async"))
			spy := newBudgetSpy(c)
			budgetCrawl(t, mode, c, sites[0].URL, sites[1].URL, sites[2].URL)
			for i, s := range sites {
				if n := s.fetched(); n != 5 {
					t.Errorf("host %d served %d requests, want 5: %v", i, n, s.hits)
				}
				if s.hits["/"] != 1 {
					t.Errorf("host %d served / %d times, want 1", i, s.hits["/"])
				}
			}
			spy.mu.Lock()
			defer spy.mu.Unlock()
			if want := map[string]int{"host budget": 15}; fmt.Sprint(spy.refused) != fmt.Sprint(want) {
				t.Errorf("OnRefused got %v, want %v", spy.refused, want)
			}
			if len(spy.errs) > 0 {
				t.Errorf("OnError got %v, want nothing", spy.errs)
			}
			if got := c.Stats().Refused; got[magpie.RefusedHostBudget] != 15 || len(got) != 1 {
				t.Errorf("Stats().Refused = %v, want only %s: 15", got, magpie.RefusedHostBudget)
			}
			// A refused link is not marked visited: a later crawl with a
			// larger budget may take it.
			for i, s := range sites {
				for p := range 9 {
					u := fmt.Sprintf("%s/p/%d", s.URL, p)
					s.mu.Lock()
					fetched := s.hits[fmt.Sprintf("/p/%d", p)] > 0
					s.mu.Unlock()
					if seen, err := c.HasVisited(u); err != nil || seen != fetched {
						t.Errorf("host %d: HasVisited(/p/%d) = %v, %v; want %v (fetched: %v)", i, p, seen, err, fetched, fetched)
					}
				}
			}
		})
	}
}

// Issue 39 point 3: a LimitRule's MaxRequestsPerHost sets the budget of
// the hosts it matches, above or below the collector's, and alone; a rule
// matching a host without setting one leaves the collector's.
func TestMaxRequestsPerHostRule(t *testing.T) {
	for _, tc := range []struct {
		name       string
		collector  int
		a, b, c    int // the rules' MaxRequestsPerHost for each host (0: no budget set)
		wantServed [3]int
	}{
		{name: "overrides the collector's", collector: 5, b: 2, c: 8, wantServed: [3]int{5, 2, 8}},
		{name: "without the collector's", b: 3, wantServed: [3]int{10, 3, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sites := []*budgetSite{newBudgetSite(t, 9), newBudgetSite(t, 9), newBudgetSite(t, 9)}
			c := magpie.NewCollector(magpie.MaxRequestsPerHost(tc.collector), magpie.Async())
			spy := newBudgetSpy(c)
			// Matched on host:port: the three sites share 127.0.0.1.
			for i, n := range []int{tc.a, tc.b, tc.c} {
				if err := c.Limit(&magpie.LimitRule{DomainGlob: sites[i].host(t), Parallelism: 2, MaxRequestsPerHost: n}); err != nil {
					t.Fatal(err)
				}
			}
			budgetCrawl(t, "async", c, sites[0].URL, sites[1].URL, sites[2].URL)
			refused := 0
			for i, s := range sites {
				if n := s.fetched(); n != tc.wantServed[i] {
					t.Errorf("host %d served %d requests, want %d", i, n, tc.wantServed[i])
				}
				refused += 10 - tc.wantServed[i]
			}
			if got := c.Stats().Refused[magpie.RefusedHostBudget]; got != uint64(refused) {
				t.Errorf("Stats().Refused[%s] = %d, want %d", magpie.RefusedHostBudget, got, refused)
			}
			spy.mu.Lock()
			defer spy.mu.Unlock()
			if spy.refused["host budget"] != refused || len(spy.errs) > 0 {
				t.Errorf("OnRefused got %v and OnError %v, want %d host budget refusals and no error", spy.refused, spy.errs, refused)
			}
		})
	}
}

// Issue 39 point 3: a budget below 0 is an error value, errors.Is
// ErrNegativeBudget: from Limit and Limits for a rule (none of the rules
// given is then added), and from the Visit or queue run that would start a
// crawl for the option's, which then fetches nothing.
func TestMaxRequestsPerHostNegative(t *testing.T) {
	c := magpie.NewCollector(magpie.Async())
	err := c.Limit(&magpie.LimitRule{DomainGlob: "*", MaxRequestsPerHost: -1})
	if !errors.Is(err, magpie.ErrNegativeBudget) {
		t.Errorf("Limit(MaxRequestsPerHost: -1) error = %v, want ErrNegativeBudget", err)
	}
	err = c.Limits([]*magpie.LimitRule{{DomainGlob: "*", MaxRequestsPerHost: 1}, {DomainGlob: "*.example", MaxRequestsPerHost: -2}})
	if !errors.Is(err, magpie.ErrNegativeBudget) || !strings.Contains(err.Error(), "-2") {
		t.Errorf("Limits(..., MaxRequestsPerHost: -2) error = %v, want ErrNegativeBudget naming -2", err)
	}
	all := newBudgetSite(t, 2)
	newBudgetSpy(c)
	budgetCrawl(t, "async", c, all.URL)
	if n := all.fetched(); n != 3 {
		t.Errorf("after Limits failed, the crawl fetched %d pages, want all 3: the valid rule's budget (1) was added", n)
	}

	site := newBudgetSite(t, 2)
	for _, async := range []bool{false, true} {
		c := magpie.NewCollector(magpie.MaxRequestsPerHost(-3), magpie.Async(async))
		if err := c.Visit(site.URL + "/"); !errors.Is(err, magpie.ErrNegativeBudget) || !strings.Contains(err.Error(), "-3") {
			t.Errorf("Visit with MaxRequestsPerHost(-3), Async(%v): error = %v, want ErrNegativeBudget naming -3", async, err)
		}
		c.Wait()
	}
	q, err := queue.New(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(site.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := q.Run(magpie.NewCollector(magpie.MaxRequestsPerHost(-1))); !errors.Is(err, magpie.ErrNegativeBudget) {
		t.Errorf("queue Run with MaxRequestsPerHost(-1): error = %v, want ErrNegativeBudget", err)
	}
	if n := site.fetched(); n != 0 {
		t.Errorf("the site served %d requests, want none", n)
	}
}

// Issue 39 point 3: the budget is exact however many goroutines admit at
// once, as MaxRequests is: 200 concurrent Visits of distinct pages of one
// host with a budget of 7 fetch 7 and refuse 193.
func TestMaxRequestsPerHostConcurrent(t *testing.T) {
	site := newBudgetSite(t, 0)
	c := magpie.NewCollector(magpie.MaxRequestsPerHost(7), magpie.Async())
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range 200 {
		wg.Go(func() {
			err := c.Visit(fmt.Sprintf("%s/p/%d", site.URL, i))
			if errors.Is(err, magpie.ErrMaxRequestsPerHost) {
				mu.Lock()
				refused++
				mu.Unlock()
			} else if err != nil {
				t.Errorf("Visit(/p/%d) error = %v", i, err)
			}
		})
	}
	wg.Wait()
	c.Wait()
	if n := site.fetched(); n != 7 || refused != 193 {
		t.Errorf("200 concurrent Visits: %d fetched and %d refused, want 7 and 193", n, refused)
	}
	if got := c.Stats().Refused[magpie.RefusedHostBudget]; got != 193 {
		t.Errorf("Stats().Refused[%s] = %d, want 193", magpie.RefusedHostBudget, got)
	}
}

// Issue 39 point 3: a request refused as already visited gives back the
// slot it took, and once a host's budget is spent a Visit to it is refused
// for the budget, visited or not.
func TestMaxRequestsPerHostVisited(t *testing.T) {
	site := newBudgetSite(t, 0)
	c := magpie.NewCollector(magpie.MaxRequestsPerHost(2))
	for _, step := range []struct {
		path string
		want error // nil: fetched
	}{
		{"/a", nil},
		{"/a", &magpie.AlreadyVisitedError{}},
		{"/b", nil}, // the second slot: the refused /a gave its back
		{"/c", magpie.ErrMaxRequestsPerHost},
		{"/a", &magpie.AlreadyVisitedError{}}, // visited first, as with a spent MaxRequests
	} {
		err := c.Visit(site.URL + step.path)
		var ok bool
		switch want := step.want.(type) {
		case nil:
			ok = err == nil
		case *magpie.AlreadyVisitedError:
			_, ok = errors.AsType[*magpie.AlreadyVisitedError](err)
		default:
			ok = errors.Is(err, want)
		}
		if !ok {
			t.Errorf("Visit(%s) error = %v, want %v", step.path, err, step.want)
		}
	}
	if n := site.fetched(); n != 2 {
		t.Errorf("the host served %d requests, want 2", n)
	}
}

// Issue 39 point 3: retries and redirects count as MaxRequests counts
// them. A RetryPolicy retry takes no slot of the budget, nor does a
// redirect hop, which counts for the host of the URL admitted, not for the
// host it lands on; a link the page finds after its host's budget is spent
// is refused.
func TestMaxRequestsPerHostRetriesAndRedirects(t *testing.T) {
	b := newBudgetSite(t, 2) // / links to /p/0 and /p/1
	var mu sync.Mutex
	hits := map[string]int{}
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/flaky">f</a><a href="/moved">m</a><a href="/more">x</a>`)
		case "/flaky":
			if n == 1 {
				http.Error(w, "try again", http.StatusInternalServerError)
			}
		case "/moved":
			http.Redirect(w, r, b.URL+"/elsewhere", http.StatusFound)
		}
	}))
	t.Cleanup(a.Close)
	c := magpie.NewCollector(magpie.MaxRequestsPerHost(3),
		magpie.RetryPolicy(magpie.RetryOptions{MaxAttempts: 2, BaseDelay: time.Millisecond}))
	spy := newBudgetSpy(c)
	budgetCrawl(t, "sync", c, a.URL, b.URL)
	mu.Lock()
	gotA := fmt.Sprint(hits)
	mu.Unlock()
	// "/", "/flaky" (sent twice: one slot) and "/moved" take the 3 slots
	// of a; "/more" is refused.
	if want := fmt.Sprint(map[string]int{"/": 1, "/flaky": 2, "/moved": 1, "/robots.txt": 1}); gotA != want {
		t.Errorf("host a served %s, want %s", gotA, want)
	}
	// b served the redirect's landing page, and its 3 slots besides.
	b.mu.Lock()
	gotB := fmt.Sprint(b.hits)
	b.mu.Unlock()
	if want := fmt.Sprint(map[string]int{"/": 1, "/elsewhere": 1, "/p/0": 1, "/p/1": 1}); gotB != want {
		t.Errorf("host b served %s, want %s", gotB, want)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if spy.refused["host budget"] != 1 || len(spy.refused) != 1 {
		t.Errorf("OnRefused got %v, want 1 host budget refusal (/more)", spy.refused)
	}
}

// Issue 39 point 3: Request.Retry submits the request again, and takes a
// slot of its host's budget, as it takes one of MaxRequests.
func TestMaxRequestsPerHostRequestRetry(t *testing.T) {
	site := newBudgetSite(t, 2)
	c := magpie.NewCollector(magpie.MaxRequestsPerHost(2))
	retried := false
	c.OnResponse(func(r *magpie.Response) {
		if r.Request.URL.Path == "/" && !retried {
			retried = true
			if err := r.Request.Retry(); err != nil {
				t.Errorf("Retry() error = %v", err)
			}
		}
	})
	spy := newBudgetSpy(c)
	budgetCrawl(t, "sync", c, site.URL)
	site.mu.Lock()
	served := fmt.Sprint(site.hits)
	site.mu.Unlock()
	if want := fmt.Sprint(map[string]int{"/": 2}); served != want {
		t.Errorf("the host served %s, want %s: the retry took the second slot", served, want)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	// Both answers link to /p/0 and /p/1.
	if spy.refused["host budget"] != 4 || len(spy.refused) != 1 {
		t.Errorf("OnRefused got %v, want 4 host budget refusals (/p/0 and /p/1, twice)", spy.refused)
	}
}

// Issue 39 point 3, as the README says: the counts are the collector's,
// kept in memory, so a crawl resumed from a durable store by a new
// collector (a new process) gives each host its budget afresh; what was
// fetched before is not fetched again.
func TestMaxRequestsPerHostResumed(t *testing.T) {
	site := newBudgetSite(t, 0)
	store, err := sqlitestore.Open(filepath.Join(t.TempDir(), "crawl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	q, err := queue.New(1, store)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := q.AddURL(fmt.Sprintf("%s/p/%d", site.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	// The first run ends after 2 requests (MaxRequests leaves the rest in
	// the queue, as a killed run would).
	first := magpie.NewCollector(magpie.MaxRequestsPerHost(2), magpie.MaxRequests(2))
	if err := first.SetStorage(store); err != nil {
		t.Fatal(err)
	}
	if err := q.Run(first); err != nil {
		t.Fatal(err)
	}
	if n := site.fetched(); n != 2 {
		t.Fatalf("first run fetched %d, want 2", n)
	}
	second := magpie.NewCollector(magpie.MaxRequestsPerHost(2))
	if err := second.SetStorage(store); err != nil {
		t.Fatal(err)
	}
	if err := q.Run(second); err != nil {
		t.Fatal(err)
	}
	site.mu.Lock()
	served := fmt.Sprint(site.hits)
	site.mu.Unlock()
	if n := site.fetched(); n != 4 || strings.Count(served, ":1") != 4 {
		t.Errorf("after the second run the host served %s, want 4 pages, each once", served)
	}
	if got := second.Stats().Refused[magpie.RefusedHostBudget]; got != 2 {
		t.Errorf("second run: Stats().Refused[%s] = %d, want 2", magpie.RefusedHostBudget, got)
	}
}

// countingQueue is a storage.Queue that counts the entries pushed to it.
type countingQueue struct {
	storage.Queue
	mu     sync.Mutex
	pushed int
}

func (q *countingQueue) Push(ctx context.Context, data ...[]byte) error {
	q.mu.Lock()
	q.pushed += len(data)
	q.mu.Unlock()
	return q.Queue.Push(ctx, data...)
}

// Issue 39 point 3: in a queue run, the links a host's pages find once its
// budget is spent are refused when found, not stored: a crawl trap (every
// page links to 5 new ones) cannot fill the queue.
func TestMaxRequestsPerHostQueueTrap(t *testing.T) {
	var mu sync.Mutex
	served := 0
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		served++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		for k := range 5 {
			fmt.Fprintf(w, `<a href="%s/%d">%d</a>`, strings.TrimSuffix(r.URL.Path, "/"), k, k)
		}
	}))
	t.Cleanup(trap.Close)
	store := &countingQueue{Queue: &queue.InMemoryQueueStorage{MaxSize: 1000}}
	q, err := queue.New(1, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(trap.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.MaxRequestsPerHost(2))
	spy := newBudgetSpy(c)
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	store.mu.Lock()
	defer store.mu.Unlock()
	// / and /0 are fetched; /1 … /4 were stored before the budget was
	// spent and are refused when leased; the links of /0 when found.
	if served != 2 || store.pushed != 6 {
		t.Errorf("served %d pages and stored %d entries, want 2 and 6 (the start URL and its 5 links)", served, store.pushed)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if spy.refused["host budget"] != 9 || len(spy.refused) != 1 {
		t.Errorf("OnRefused got %v, want 9 host budget refusals", spy.refused)
	}
}
