package dashboard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// site is a crawl target: / links to /p/0 … /p/n-1 and to /missing (404);
// pages under /p/ wait for release (closed: all go).
type site struct {
	*httptest.Server
	release chan struct{}
	mu      sync.Mutex
	hits    map[string]int
}

func newSite(t *testing.T, n int) *site {
	t.Helper()
	s := &site{release: make(chan struct{}), hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch {
		case r.URL.Path == "/":
			for i := range n {
				fmt.Fprintf(w, `<a href="/p/%d">p</a>`, i)
			}
			fmt.Fprint(w, `<a href="/missing">m</a>`)
		case strings.HasPrefix(r.URL.Path, "/p/"):
			select {
			case <-s.release:
			case <-r.Context().Done():
			}
			fmt.Fprint(w, "<html>page</html>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) count(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[p]
}

// newCrawl starts an async crawl of s that links stay in.
func newCrawl(t *testing.T, s *site) *magpie.Collector {
	t.Helper()
	c := magpie.NewCollector(magpie.Async(), magpie.IgnoreRobotsTxt(), magpie.AllowedDomains("127.0.0.1"))
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// serve mounts h on a test server and closes both at the end.
func serve(t *testing.T, h *Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		_ = h.Close()
		srv.Close()
	})
	return srv
}

func do(t *testing.T, method, u string, form url.Values, hdr map[string]string) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIReads: the page and its assets are served from the embedded
// files, and each GET of the API answers JSON with the collector's figures.
func TestAPIReads(t *testing.T) {
	s := newSite(t, 2)
	close(s.release)
	c := newCrawl(t, s)
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	h := New(c)
	srv := serve(t, h)
	for path, want := range map[string]string{"/": "<canvas id=\"chart-pages\"", "/app.js": "EventSource", "/style.css": "@media"} {
		if code, body := do(t, "GET", srv.URL+path, nil, nil); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d, want 200 with %q", path, code, want)
		}
	}
	var st magpie.Stats
	getJSON(t, srv.URL+"/api/stats", &st)
	if want := c.Stats(); st.Responses != want.Responses || st.Responses != 4 || st.Failed[magpie.FailHTTP] != 1 {
		t.Errorf("/api/stats responses %d, failed %v; want 4 and http 1 as Stats()", st.Responses, st.Failed)
	}
	var fails []magpie.Failure
	getJSON(t, srv.URL+"/api/failures", &fails)
	if len(fails) != 1 || fails[0].Referrer != s.URL+"/" || fails[0].Status != 404 {
		t.Errorf("/api/failures = %+v, want /missing linked from /", fails)
	}
	var hosts []magpie.HostReport
	getJSON(t, srv.URL+"/api/hosts?n=5", &hosts)
	if len(hosts) != 1 || hosts[0].Done != 4 || hosts[0].Failed != 1 {
		t.Errorf("/api/hosts = %+v", hosts)
	}
	var fr Frontier
	getJSON(t, srv.URL+"/api/frontier", &fr)
	if fr.Error != magpie.ErrNoCrawl.Error() || fr.Entries == nil {
		t.Errorf("/api/frontier after the crawl = %+v, want no crawl running", fr)
	}
	if code, _ := do(t, "GET", srv.URL+"/api/hosts?n=x", nil, nil); code != 400 {
		t.Errorf("GET /api/hosts?n=x = %d, want 400", code)
	}
	var pts []Point
	getJSON(t, srv.URL+"/api/series", &pts)
	if pts == nil {
		t.Error("/api/series is null, want a list")
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	code, body := do(t, "GET", u, nil, nil)
	if code != 200 {
		t.Fatalf("GET %s = %d %s", u, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, body)
	}
}

// TestActions: the POSTs pause, resume, add a URL, block a host and stop;
// bad input is answered with its reason and changes nothing.
func TestActions(t *testing.T) {
	s := newSite(t, 2)
	c := newCrawl(t, s)
	srv := serve(t, New(c))
	post := func(path string, form url.Values) (int, string) { return do(t, "POST", srv.URL+path, form, nil) }
	if code, _ := post("/api/add", url.Values{"url": {s.URL + "/p/9"}}); code != http.StatusConflict {
		t.Errorf("add without a crawl = %d, want 409", code)
	}
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if code, _ := post("/api/pause", nil); code != 200 || !c.Paused() {
		t.Errorf("pause = %d, paused %v", code, c.Paused())
	}
	if code, _ := post("/api/resume", nil); code != 200 || c.Paused() {
		t.Errorf("resume = %d, paused %v", code, c.Paused())
	}
	if code, body := post("/api/add", url.Values{"url": {"http://elsewhere.example/"}}); code != 400 || !strings.Contains(body, magpie.ErrForbiddenDomain.Error()) {
		t.Errorf("add out of scope = %d %s, want 400 with the reason", code, body)
	}
	if code, body := post("/api/add", url.Values{"url": {"::"}}); code != 400 || !strings.Contains(body, "invalid URL") {
		t.Errorf("add a bad URL = %d %s, want 400 with the reason", code, body)
	}
	if code, _ := post("/api/add", url.Values{"url": {s.URL + "/p/9"}}); code != http.StatusAccepted {
		t.Errorf("add = %d, want 202", code)
	}
	if code, body := post("/api/block", url.Values{"host": {"unknown.example"}}); code != 404 || !strings.Contains(body, "not in the crawl") {
		t.Errorf("block an unknown host = %d %s", code, body)
	}
	if code, body := post("/api/block", url.Values{}); code != 400 {
		t.Errorf("block without host = %d %s", code, body)
	}
	if code, body := post("/api/block", url.Values{"host": {"127.0.0.1"}}); code != 200 {
		t.Errorf("block 127.0.0.1 = %d %s", code, body)
	}
	if err := c.Visit(s.URL + "/p/8"); err == nil {
		t.Error("Visit of a blocked host succeeded")
	}
	close(s.release)
	if code, _ := post("/api/stop", nil); code != 200 {
		t.Errorf("stop = %d", code)
	}
	c.Wait()
	if s.count("/p/9") != 1 {
		t.Errorf("the added URL was fetched %d times", s.count("/p/9"))
	}
}

// TestToken: with a token every request must carry it; a wrong or
// missing one gets 403 and no action.
func TestToken(t *testing.T) {
	c := magpie.NewCollector()
	srv := serve(t, New(c, Token("s3cret")))
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		q    string
		want int
	}{
		{"none", nil, "", 403},
		{"wrong header", map[string]string{"X-Magpie-Token": "nope"}, "", 403},
		{"wrong query", nil, "?token=s3cre", 403},
		{"header", map[string]string{"X-Magpie-Token": "s3cret"}, "", 200},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, "", 200},
		{"query", nil, "?token=s3cret", 200},
		{"any host with a token", map[string]string{"X-Magpie-Token": "s3cret", "Host": "crawler.lan:7070"}, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, _ := do(t, "GET", srv.URL+"/api/stats"+tc.q, nil, tc.hdr); code != tc.want {
				t.Errorf("GET /api/stats = %d, want %d", code, tc.want)
			}
			code, _ := do(t, "POST", srv.URL+"/api/pause"+tc.q, nil, tc.hdr)
			if code != tc.want || c.Paused() != (tc.want == 200) {
				t.Errorf("POST /api/pause = %d (paused %v), want %d", code, c.Paused(), tc.want)
			}
			c.Resume()
		})
	}
}

// TestLoopbackOnly: without a token, a request addressed to another host
// name (a DNS rebinding) is refused.
func TestLoopbackOnly(t *testing.T) {
	c := magpie.NewCollector()
	srv := serve(t, New(c))
	for host, want := range map[string]int{"evil.example:80": 403, "10.0.0.1:7070": 403, "localhost:7070": 200, "[::1]:7070": 200, "127.0.0.2": 200} {
		if code, _ := do(t, "POST", srv.URL+"/api/pause", nil, map[string]string{"Host": host}); code != want {
			t.Errorf("POST with Host %s = %d, want %d", host, code, want)
		}
		if c.Paused() != (want == 200) {
			t.Errorf("Host %s: paused %v", host, c.Paused())
		}
		c.Resume()
	}
}

// TestCrossSitePost: a browser's cross-site POST is refused and does
// nothing; a same-origin one and a script's (no browser headers) pass.
func TestCrossSitePost(t *testing.T) {
	c := magpie.NewCollector()
	srv := serve(t, New(c))
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, 403},
		{"cross-site form, Origin only", map[string]string{"Origin": "http://evil.example"}, 403},
		{"same-site other port", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, 403},
		{"same-origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL}, 200},
		{"script", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _ := do(t, "POST", srv.URL+"/api/pause", nil, tc.hdr)
			if code != tc.want || c.Paused() != (tc.want == 200) {
				t.Errorf("POST /api/pause = %d (paused %v), want %d", code, c.Paused(), tc.want)
			}
			c.Resume()
		})
	}
}

// TestEvents: /api/events sends a snapshot at once and one a second;
// Close ends the stream and the sampler, and the handler then answers 503.
func TestEvents(t *testing.T) {
	s := newSite(t, 1)
	c := newCrawl(t, s)
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	h := New(c, func(h *Handler) { h.tick = 20 * time.Millisecond })
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var snaps []Snapshot
	for len(snaps) < 3 && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var sn Snapshot
			if err := json.Unmarshal([]byte(d), &sn); err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, sn)
		}
	}
	if len(snaps) != 3 {
		t.Fatalf("got %d snapshots: %v", len(snaps), sc.Err())
	}
	last := snaps[2]
	if last.Stats.Pending == 0 || len(last.Hosts) != 1 || last.InFlight != 1 || last.Memory == 0 || last.Point.T == 0 {
		t.Errorf("snapshot = %+v, want the crawl running with /p/0 in flight", last)
	}
	closed := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(closed)
	}()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream did not end on Close")
	}
	if code, _ := do(t, "GET", srv.URL+"/api/stats", nil, nil); code != 503 {
		t.Errorf("GET after Close = %d, want 503", code)
	}
	close(s.release)
	c.Wait()
}

// TestSamplerRing: points are the pages and failures per second between
// samples; the ring keeps the last hour, oldest first.
func TestSamplerRing(t *testing.T) {
	s := newSite(t, 2)
	close(s.release)
	c := newCrawl(t, s)
	sm := newSampler(c, time.Second)
	t0 := sm.last
	if err := c.Visit(s.URL + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	sm.sample(t0.Add(2 * time.Second))
	p, _ := sm.latest()
	if p.Pages != 2 || p.Failures != 0.5 {
		t.Errorf("point = %+v, want 4 pages and 1 failure over 2 s", p)
	}
	for i := range historyLen + 10 {
		sm.sample(t0.Add(time.Duration(3+i) * time.Second))
	}
	pts := sm.points(0)
	if len(pts) != historyLen || pts[len(pts)-1].T != t0.Add(time.Duration(historyLen+12)*time.Second).UnixMilli() {
		t.Fatalf("%d points, last %d", len(pts), pts[len(pts)-1].T)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].T <= pts[i-1].T {
			t.Fatalf("points out of order at %d", i)
		}
	}
	if got := sm.points(10); len(got) != 10 || got[9] != pts[len(pts)-1] {
		t.Errorf("points(10) = %d, not the newest", len(got))
	}
}
