package sqlitestore

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// politeDelay is the shared crawl's LimitRule.Delay.
const politeDelay = 20 * time.Millisecond

// TestHelperPoliteCrawler is a child process of TestSharedPoliteness: it
// crawls with the Store at MAGPIE_POLITE_DB, one request at a time per host
// with politeDelay between starts, through SharedLimits on the file's
// HostLimiter, and prints every grant. It does nothing in a normal test run.
func TestHelperPoliteCrawler(t *testing.T) {
	dbPath := os.Getenv("MAGPIE_POLITE_DB")
	if dbPath == "" {
		t.Skip("helper process for TestSharedPoliteness")
	}
	s, err := Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hl := s.HostLimiter(0)
	// Report every grant to the parent, on the clock read under the file's
	// write lock.
	var mu sync.Mutex
	hl.OnGrant(func(host string, at time.Time) {
		mu.Lock()
		fmt.Printf("GRANT %s %d\n", host, at.UnixMicro())
		mu.Unlock()
	})
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt(), magpie.SharedLimits(hl))
	if err := c.SetStorage(s); err != nil {
		t.Fatal(err)
	}
	if err := c.Limit(&magpie.LimitRule{DomainGlob: "*", Parallelism: 1, Delay: politeDelay}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	q, err := queue.New(4, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
}

// politeSite is pages pages over len(srvs) servers (page i on server i%n);
// page i links to pages 2i+1 and 2i+2, wherever they live, and back to page
// 0. Each server counts fetches per page and the most requests it had in
// flight at once.
type politeSite struct {
	pages int
	urls  []string

	mu       sync.Mutex // guards the fields below
	counts   map[int]int
	inflight []int
	maxIn    []int
}

func newPoliteSite(t *testing.T, pages, servers int) *politeSite {
	t.Helper()
	s := &politeSite{pages: pages, counts: map[int]int{}, inflight: make([]int, servers), maxIn: make([]int, servers)}
	var srvs []*httptest.Server
	for k := range servers {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.serve(k, w, r)
		}))
		srvs = append(srvs, srv)
		s.urls = append(s.urls, "http://"+srv.Listener.Addr().String())
		t.Cleanup(srv.Close)
	}
	// Start only once every URL is known: pages link across servers.
	for _, srv := range srvs {
		srv.Start()
	}
	return s
}

func (s *politeSite) url(i int) string { return fmt.Sprintf("%s/p/%d", s.urls[i%len(s.urls)], i) }

func (s *politeSite) serve(k int, w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
	if err != nil || i < 0 || i >= s.pages || i%len(s.urls) != k {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.counts[i]++
	s.inflight[k]++
	s.maxIn[k] = max(s.maxIn[k], s.inflight[k])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight[k]--
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, `<html><body><a href="%s">home</a>`, s.url(0))
	for _, j := range []int{2*i + 1, 2*i + 2} {
		if j < s.pages {
			fmt.Fprintf(w, ` <a href="%s">%d</a>`, s.url(j), j)
		}
	}
	fmt.Fprint(w, "</body></html>")
}

// TestSharedPoliteness runs two crawler processes on one file over three
// hosts under LimitRule{DomainGlob: "*", Parallelism: 1, Delay: 20ms} with
// SharedLimits(store.HostLimiter(0)): every page is fetched once, the starts
// granted for a host across both processes are at least Delay apart (on the
// clock read under the file's write lock, which orders every grant), and no
// server ever has two requests in flight.
func TestSharedPoliteness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts crawler processes")
	}
	const pages, servers, procs = 360, 3, 2
	site := newPoliteSite(t, pages, servers)
	dbPath := filepath.Join(t.TempDir(), "crawl.db")
	s, err := Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(1, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(site.url(0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	errs := make(chan error, procs)
	outs := make([]*strings.Builder, procs)
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPoliteCrawler$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MAGPIE_POLITE_DB="+dbPath)
		out := &strings.Builder{}
		outs[p] = out
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, out)
			}
			errs <- err
		}()
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Errorf("crawler process error = %v", err)
		}
	}
	t.Logf("%d pages over %d hosts by %d processes in %v", pages, servers, procs, time.Since(begin).Round(time.Millisecond))

	grants := map[string][]int64{}
	byProc := make([]int, procs)
	for p, out := range outs {
		for line := range strings.SplitSeq(out.String(), "\n") {
			var host string
			var at int64
			if n, _ := fmt.Sscanf(line, "GRANT %s %d", &host, &at); n == 2 {
				grants[host] = append(grants[host], at)
				byProc[p]++
			}
		}
	}
	site.mu.Lock()
	defer site.mu.Unlock()
	for i := range pages {
		if n := site.counts[i]; n != 1 {
			t.Errorf("page %d fetched %d times, want 1", i, n)
		}
	}
	if len(grants) != servers {
		t.Fatalf("grants for %d hosts, want %d", len(grants), servers)
	}
	for host, at := range grants {
		slices.Sort(at)
		if len(at) != pages/servers {
			t.Errorf("host %s: %d starts granted, want %d (one per page)", host, len(at), pages/servers)
		}
		shortest := time.Duration(1<<63 - 1)
		for i := 1; i < len(at); i++ {
			gap := time.Duration(at[i]-at[i-1]) * time.Microsecond
			shortest = min(shortest, gap)
			if gap < politeDelay {
				t.Errorf("host %s: starts %d and %d granted %v apart, want >= %v", host, i-1, i, gap, politeDelay)
			}
		}
		t.Logf("host %s: %d starts granted, shortest gap %v", host, len(at), shortest)
	}
	t.Logf("grants by process: %v", byProc)
	for k, m := range site.maxIn {
		if m > 1 {
			t.Errorf("server %d: %d requests in flight at once, want at most 1", k, m)
		}
	}
}
