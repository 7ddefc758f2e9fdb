package magpie

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestIdleConnBudget: magpie's own transport keeps idle connections for as
// many hosts as the process may hold open, half its open-file limit,
// within [minIdleConns, maxIdleConns], not a fixed 1,024 that a crawl of
// 2,000 hosts outgrows (each request then dials again).
func TestIdleConnBudget(t *testing.T) {
	for _, tt := range []struct {
		openFiles uint64
		want      int
	}{
		{0, maxIdleConns}, // unknown
		{256, minIdleConns},
		{2048, minIdleConns},
		{20000, 10000},
		{65536, 32768},
		{1 << 20, maxIdleConns},
	} {
		if got := idleConnBudget(tt.openFiles); got != tt.want {
			t.Errorf("idleConnBudget(%d) = %d, want %d", tt.openFiles, got, tt.want)
		}
	}
	if n := openFileLimit(); n > 0 && idleConnBudget(n) > int(n) {
		t.Errorf("idleConnBudget(%d) = %d: more idle connections than open files", n, idleConnBudget(n))
	}
}

// TestTransportIdlePoolSizing: magpie's own transport, as built and as
// retuned for many workers, sizes its idle pool by idleConnBudget; a
// transport the user set keeps its own limits.
func TestTransportIdlePoolSizing(t *testing.T) {
	ts := newTestServer(t)
	want := idleConnBudget(openFileLimit())
	userTransport := &http.Transport{MaxIdleConns: 7, MaxIdleConnsPerHost: 3}
	tests := []struct {
		name          string
		set           func(c *Collector)
		idle, perHost int
	}{
		{"own transport", func(*Collector) {}, want, 300},
		{"user transport", func(c *Collector) { c.WithTransport(userTransport) }, 7, 3},
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
			if tr.MaxIdleConns != tt.idle || tr.MaxIdleConnsPerHost != tt.perHost {
				t.Errorf("MaxIdleConns, MaxIdleConnsPerHost = %d, %d; want %d, %d",
					tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tt.idle, tt.perHost)
			}
		})
	}
}

// TestPoliteCrawlReusesEachHostsConnection: a crawl of many hosts, each
// with Parallelism 1 and a Delay, dials each host once: robots.txt and
// every page of a host travel on one connection, kept idle between the
// host's turns.
func TestPoliteCrawlReusesEachHostsConnection(t *testing.T) {
	const hosts, pages = 24, 4
	var mu sync.Mutex
	conns := map[string]int{} // new connections by host:port
	servers := make([]*httptest.Server, hosts)
	for i := range servers {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				fmt.Fprint(w, siteRobots)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body>")
			for p := range pages {
				fmt.Fprintf(w, `<a href="/p/%d">p</a>`, p)
			}
			fmt.Fprint(w, "</body></html>")
		}))
		srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				mu.Lock()
				conns[c.LocalAddr().String()]++
				mu.Unlock()
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		servers[i] = srv
	}
	c := NewCollector(Async(), Workers(8))
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 1, Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var ok int
	c.OnResponse(func(*Response) { mu.Lock(); ok++; mu.Unlock() })
	for _, srv := range servers {
		if err := c.Visit(srv.URL + "/"); err != nil {
			t.Fatalf("Visit(%s) error = %v", srv.URL, err)
		}
	}
	c.Wait()
	mu.Lock()
	defer mu.Unlock()
	if want := hosts * (pages + 1); ok != want {
		t.Fatalf("%d responses, want %d", ok, want)
	}
	for _, srv := range servers {
		if n := conns[srv.Listener.Addr().String()]; n != 1 {
			t.Errorf("host %s: %d connections, want 1 (robots.txt and %d pages on one)", srv.Listener.Addr(), n, pages+1)
		}
	}
}

// TestIdleConnBytes measures what a host's idle connection costs, heap and
// goroutine stacks: the transport's end (a reader and a writer goroutine,
// their buffers) and, in this process too, the test server's end. A broad
// crawl keeps one per host in rotation, so it is most of a host's state;
// the bound says how much.
func TestIdleConnBytes(t *testing.T) {
	const hosts = 100
	servers := make([]*httptest.Server, hosts)
	for i := range servers {
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "ok")
		}))
		t.Cleanup(servers[i].Close)
	}
	tr := NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	get := func(u string) {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s error = %v", u, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	get(servers[0].URL) // the transport's and server's one-time state
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, srv := range servers[1:] {
		get(srv.URL)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc+after.StackInuse) - int64(before.HeapAlloc+before.StackInuse)
	per := grown / (hosts - 1)
	t.Logf("an idle connection: %d bytes, both ends (heap and stacks)", per)
	// 64 KiB for both ends: a bufio reader and writer and two goroutines
	// each, with room for the race detector.
	if per > 64<<10 {
		t.Errorf("an idle connection holds %d bytes with the server's end, want at most 64 KiB", per)
	}
}
