package magpie

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pacedTestReq is a request to url as Visit makes one (not compact).
func pacedTestReq(t *testing.T, c *Collector, url string) *Request {
	t.Helper()
	req, err := c.newRequest(url, http.MethodGet, 0, nil, nil, nil)
	if err != nil {
		t.Fatalf("newRequest(%q) error = %v", url, err)
	}
	return req
}

// takeAll takes what the frontier hands out now, as URLs.
func takeAll(f *memFrontier) []string {
	var out []string
	for {
		r, _ := f.take()
		if r == nil {
			return out
		}
		out = append(out, r.URL.String())
	}
}

// TestFrontierPacedNewHostFirst: once a host has its share of requests out
// (taken, not started) and the gate's room is used, a host found later is
// served before the rest of that host's backlog; each host keeps its own
// order, and a start lets the paced host go on.
func TestFrontierPacedNewHostFirst(t *testing.T) {
	c := NewCollector()
	f := newMemFrontier(0)
	f.pace(2, 4)
	for i := range 8 {
		if err := f.push(context.Background(), pacedTestReq(t, c, fmt.Sprintf("http://a.test/%d", i)), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.push(context.Background(), pacedTestReq(t, c, "http://b.test/0"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	// a.test takes its 2 and the room's 2 more; b.test is under its share.
	want := []string{"http://a.test/0", "http://a.test/1", "http://a.test/2", "http://a.test/3", "http://b.test/0"}
	if got := takeAll(f); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("taken = %v, want %v", got, want)
	}
	// One start of a.test leaves it at 3 out, at or over its share, and
	// 4 out in all: the room is still full.
	f.started("a.test")
	if got := takeAll(f); len(got) != 0 {
		t.Fatalf("taken after one start = %v, want none (room full)", got)
	}
	f.started("b.test") // 3 out in all: the room has one
	if got := takeAll(f); strings.Join(got, " ") != "http://a.test/4" {
		t.Fatalf("taken after b.test started = %v, want [http://a.test/4]", got)
	}
	f.started("a.test")
	f.started("a.test")
	f.started("a.test") // a.test: 1 out, under its share
	want = []string{"http://a.test/5", "http://a.test/6", "http://a.test/7"}
	if got := takeAll(f); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("taken after three starts = %v, want %v", got, want)
	}
	for range 4 {
		f.started("a.test")
	}
	f.started("a.test") // one more than out: ignored
	f.mu.Lock()
	hosts, out := len(f.hosts), f.out
	f.mu.Unlock()
	if hosts != 0 || out != 0 {
		t.Errorf("after every start: %d hosts kept, %d out; want 0 and 0", hosts, out)
	}
}

// TestFrontierUnpacedFIFO: without pace the frontier hands requests out in
// the order they came, across hosts, and close returns the rest in that
// order too.
func TestFrontierUnpacedFIFO(t *testing.T) {
	c := NewCollector()
	f := newMemFrontier(0)
	var urls []string
	for i := range 12 {
		u := fmt.Sprintf("http://h%d.test/%d", i%3, i)
		urls = append(urls, u)
		if err := f.push(context.Background(), pacedTestReq(t, c, u), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 5 {
		r, _ := f.take()
		got = append(got, r.URL.String())
	}
	for _, r := range f.close() {
		got = append(got, r.URL.String())
	}
	if strings.Join(got, " ") != strings.Join(urls, " ") {
		t.Errorf("order = %v, want %v", got, urls)
	}
}

// TestFrontierPacedNextWakes: next blocks while every host with work is
// paced, and a start wakes it.
func TestFrontierPacedNextWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCollector()
		f := newMemFrontier(0)
		f.pace(1, 1)
		for i := range 2 {
			if err := f.push(context.Background(), pacedTestReq(t, c, fmt.Sprintf("http://a.test/%d", i)), time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := f.next(t.Context()); err != nil || r.URL.Path != "/0" {
			t.Fatalf("next() = %v, %v; want /0", r, err)
		}
		got := make(chan string, 1)
		go func() {
			r, err := f.next(t.Context())
			if err != nil {
				got <- err.Error()
				return
			}
			got <- r.URL.Path
		}()
		synctest.Wait()
		select {
		case p := <-got:
			t.Fatalf("next returned %q while a.test had its share out", p)
		default:
		}
		f.started("a.test")
		if p := <-got; p != "/1" {
			t.Errorf("next after the start = %q, want /1", p)
		}
	})
}

// htmlLinksTransport serves, in memory, pages whose links links(host,
// path) gives, and records when each host+path was first asked for.
type htmlLinksTransport struct {
	links func(host, path string) []string
	mu    sync.Mutex
	hits  map[string]time.Time
}

func (s *htmlLinksTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if _, ok := s.hits[r.URL.Host+r.URL.Path]; !ok {
		s.hits[r.URL.Host+r.URL.Path] = time.Now()
	}
	s.mu.Unlock()
	var b strings.Builder
	b.WriteString("<html><body>")
	for _, l := range s.links(r.URL.Host, r.URL.Path) {
		fmt.Fprintf(&b, "<a href=%q>x</a>", l)
	}
	b.WriteString("</body></html>")
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{"Content-Type": {"text/html"}},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(strings.NewReader(b.String())), ContentLength: int64(b.Len()), Request: r,
	}, nil
}

// TestBroadNewHostNotBehindBacklog: a host whose first page links to a
// long backlog of its own pages, and then to a second host, does not hold
// the second host's first request behind that backlog: the second host
// starts within a Delay of being found, not after the backlog's hundreds
// of Delays. Every page is fetched once, each host's in link order, Delay
// apart.
func TestBroadNewHostNotBehindBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backlog, delay = 300, time.Second
		tr := &htmlLinksTransport{hits: map[string]time.Time{}, links: func(host, path string) []string {
			if host != "big.test" || path != "/" {
				return nil
			}
			var l []string
			for i := range backlog {
				l = append(l, fmt.Sprintf("/p%d", i))
			}
			return append(l, "http://new.test/")
		}}
		c := NewCollector(Async(), IgnoreRobotsTxt(), Workers(1))
		c.WithTransport(tr)
		if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay, Parallelism: 1}); err != nil {
			t.Fatalf("Limit() error = %v", err)
		}
		c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		c.OnError(func(r *Response, err error) { t.Errorf("OnError(%s) = %v", r.Request.URL, err) })
		start := time.Now()
		if err := c.Visit("http://big.test/"); err != nil {
			t.Fatalf("Visit() error = %v", err)
		}
		c.Wait()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(tr.hits) != backlog+2 {
			t.Fatalf("fetched %d pages, want %d", len(tr.hits), backlog+2)
		}
		if at := tr.hits["new.test/"].Sub(start); at > delay {
			t.Errorf("new.test/ started %v after the crawl did, want within %v (found on the first page)", at, delay)
		}
		prev := tr.hits["big.test/"]
		for i := range backlog {
			at := tr.hits[fmt.Sprintf("big.test/p%d", i)]
			if gap := at.Sub(prev); gap < delay {
				t.Fatalf("big.test/p%d started %v after the page before it, want >= %v, in link order", i, gap, delay)
			}
			prev = at
		}
	})
}

// frontierHostBytes returns the heap a frontier holds per host beyond its
// pending links: n links to n hosts less n links to one host, ÷ n.
func frontierHostBytes(t *testing.T, n int) float64 {
	t.Helper()
	c := NewCollector()
	base := mustURL(t, "http://127.0.0.1:8080/")
	fill := func(hostOf func(i int) string) any {
		f := newMemFrontier(0)
		f.pace(2, 4)
		for i := range n {
			req := pendingTestLink(t, c, base, "http://"+hostOf(i)+"/p/"+strconv.Itoa(i))
			if err := f.push(context.Background(), req, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	many := medianHeapGrowth(3, func() any {
		return fill(func(i int) string {
			return "127." + strconv.Itoa(1+i/65536) + "." + strconv.Itoa(i/256%256) + "." + strconv.Itoa(i%256) + ":8080"
		})
	})
	one := medianHeapGrowth(3, func() any { return fill(func(int) string { return "127.0.0.1:8080" }) })
	return float64(many-one) / float64(n)
}

// TestFrontierPerHostState: the in-memory frontier's per-host queues cost a
// stated number of bytes per host with links pending, the same at 2,000 and
// 20,000 hosts (linear in hosts); a host with nothing pending or out costs
// nothing (TestFrontierPacedNewHostFirst).
func TestFrontierPerHostState(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 20,000 hosts")
	}
	// 512 bytes: the queue (key, slice, counters, heap index), its map
	// slot and its own one-entry slice, with room for the race detector.
	const bound = 512
	var per [2]float64
	for i, n := range []int{2000, 20000} {
		b := frontierHostBytes(t, n)
		t.Logf("frontier, %d hosts: %.0f bytes per host", n, b)
		if b > bound {
			t.Errorf("frontier at %d hosts: %.0f bytes per host, want at most %d", n, b, bound)
		}
		per[i] = b
	}
	if per[1] > 1.25*per[0] {
		t.Errorf("frontier bytes per host grow with hosts: %.0f at 2,000, %.0f at 20,000", per[0], per[1])
	}
}
