package magpie

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// startLog records, per server, when each request arrived.
type startLog struct {
	mu     sync.Mutex
	starts map[string][]time.Time // by host:port
	paths  map[string][]string
}

func (l *startLog) add(host, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts[host] = append(l.starts[host], time.Now())
	l.paths[host] = append(l.paths[host], path)
}

// TestRobotsFetchKeepsDelay: with Delay, a host's robots.txt fetch is one of
// its requests: every gap between request starts at each server, the
// robots.txt fetch included, is at least Delay, on many hosts crawled at
// once, robots.txt fetched both at the first Visit (no crawl running yet)
// and from callbacks (links to hosts not seen before).
func TestRobotsFetchKeepsDelay(t *testing.T) {
	const (
		hosts = 12
		pages = 3
		delay = 100 * time.Millisecond
	)
	log := &startLog{starts: map[string][]time.Time{}, paths: map[string][]string{}}
	var srvs []*httptest.Server
	for range hosts {
		srv := httptest.NewUnstartedServer(nil)
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			log.add(r.Host, r.URL.Path)
			switch r.URL.Path {
			case "/robots.txt":
				fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			default:
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, "<html><body>")
				for i := range pages {
					fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
				}
				fmt.Fprint(w, "</body></html>")
			}
		})
		srv.Start()
		defer srv.Close()
		srvs = append(srvs, srv)
	}
	// The first page links to every other host's first page, so that
	// those robots.txt files are fetched from a callback while the crawl
	// runs; host 0's at the first Visit.
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r.Host, r.URL.Path)
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		for _, s := range srvs {
			fmt.Fprintf(w, `<a href="%s/">x</a>`, s.URL)
		}
	}))
	defer first.Close()

	c := NewCollector(Async())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(first.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(srvs[0].URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, s := range append(srvs, first) {
		host := s.Listener.Addr().String()
		starts, paths := log.starts[host], log.paths[host]
		if s != first && (len(starts) != pages+2 || !slices.Contains(paths, "/robots.txt")) {
			t.Errorf("%s served %v, want robots.txt, / and %d pages", host, paths, pages)
		}
		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(starts[i-1]); gap < delay {
				t.Errorf("%s: %s started %v after %s, want at least %v", host, paths[i], gap, paths[i-1], delay)
			}
		}
	}
}

// TestRobotsRetryKeepsDelay: a robots.txt fetched again while a request
// waits for it (503, then the file) is fetched in that request's turn, and
// the request is sent in a later turn: every gap at the server, the
// robots.txt fetches included, is at least Delay.
func TestRobotsRetryKeepsDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	log := &startLog{starts: map[string][]time.Time{}, paths: map[string][]string{}}
	var robots int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r.Host, r.URL.Path)
		if r.URL.Path == "/robots.txt" {
			log.mu.Lock()
			robots++
			n := robots
			log.mu.Unlock()
			if n < 3 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		fmt.Fprint(w, "page")
	}))
	defer srv.Close()
	c := NewCollector(Async())
	c.shared.robots.retryBase = time.Millisecond
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay}); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(srv.URL + "/a"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	log.mu.Lock()
	defer log.mu.Unlock()
	host := srv.Listener.Addr().String()
	starts, paths := log.starts[host], log.paths[host]
	if want := []string{"/robots.txt", "/robots.txt", "/robots.txt", "/a"}; !slices.Equal(paths, want) {
		t.Errorf("server saw %v, want %v", paths, want)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < delay {
			t.Errorf("%s started %v after %s, want at least %v (all: %v)", paths[i], gap, paths[i-1], delay, paths)
		}
	}
}
