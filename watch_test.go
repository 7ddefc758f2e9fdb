package magpie

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRecentFailuresAndHostReports: a crawl of a fast host that links to a
// broken page and to a slow host records each failure with its kind,
// status and referrer (passwords redacted), counts failures by kind in
// Stats, and reports the hosts slowest first with their done and failed
// counts and robots.txt state.
func TestRecentFailuresAndHostReports(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		time.Sleep(60 * time.Millisecond) // the slow host's latency, not synchronisation
		fmt.Fprint(w, "<html>slow</html>")
	}))
	t.Cleanup(slow.Close)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			fmt.Fprintf(w, `<a href="/missing">x</a><a href="%s/s1">s</a><a href="%s/s2">s</a><a href="/ok">ok</a>`, slow.URL, slow.URL)
		case "/ok":
			fmt.Fprint(w, "<html>ok</html>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(fast.Close)
	c := NewCollector()
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	root := strings.Replace(fast.URL, "http://", "http://user:secret@", 1) + "/"
	if err := c.Visit(root); err != nil {
		t.Fatal(err)
	}
	if err := c.Visit(fast.URL + "/gone"); err == nil {
		t.Fatal("Visit(/gone) = nil, want a 404")
	}
	fails := c.RecentFailures()
	if len(fails) != 2 {
		t.Fatalf("RecentFailures() = %+v, want 2", fails)
	}
	if f := fails[0]; f.URL != fast.URL+"/gone" || f.Referrer != "" {
		t.Errorf("newest failure = %+v, want /gone without a referrer", f)
	}
	f := fails[1]
	redacted := strings.Replace(root, "secret", "xxxxx", 1)
	if f.URL != redacted+"missing" || f.Kind != FailHTTP || f.Status != 404 || f.Method != http.MethodGet ||
		f.Host != strings.TrimPrefix(fast.URL, "http://") || f.Time.IsZero() {
		t.Errorf("failure = %+v, want /missing, http, 404", f)
	}
	if f.Referrer != redacted {
		t.Errorf("Referrer = %q, want %q (password redacted)", f.Referrer, redacted)
	}
	if got := c.Stats().Failed; got[FailHTTP] != 2 || len(got) != 1 {
		t.Errorf("Stats().Failed = %v, want http 2", got)
	}
	hosts := c.HostReports(0)
	if len(hosts) != 2 {
		t.Fatalf("HostReports() = %+v, want 2 hosts", hosts)
	}
	s, q := hosts[0], hosts[1]
	if s.Host != strings.TrimPrefix(slow.URL, "http://") || s.Done != 2 || s.Failed != 0 || s.MeanLatency < 60*time.Millisecond {
		t.Errorf("first host = %+v, want the slow one, 2 done, mean latency >= 60ms", s)
	}
	if q.Done != 4 || q.Failed != 2 || q.MeanLatency >= s.MeanLatency {
		t.Errorf("second host = %+v, want 4 done (/, /ok, /missing, /gone), 2 failed, faster", q)
	}
	for _, h := range hosts {
		if h.Robots != RobotsOK || h.Queued != 0 || h.InFlight != 0 {
			t.Errorf("host %+v: want robots ok, nothing queued or in flight", h)
		}
	}
	if got := c.HostReports(1); len(got) != 1 || got[0].Host != s.Host {
		t.Errorf("HostReports(1) = %+v", got)
	}
	c2 := NewCollector(IgnoreRobotsTxt())
	if err := c2.Visit(fast.URL + "/ok"); err != nil {
		t.Fatal(err)
	}
	if got := c2.HostReports(0); len(got) != 1 || got[0].Robots != RobotsIgnored {
		t.Errorf("HostReports() with IgnoreRobotsTxt = %+v", got)
	}
}

// TestRecentFailuresRing: the ring keeps the latest 100, newest first,
// and the count by kind keeps all.
func TestRecentFailuresRing(t *testing.T) {
	c := &Collector{}
	req := &Request{URL: mustParse(t, "http://h.example/"), Method: http.MethodGet}
	for i := range 250 {
		req.URL.Path = fmt.Sprintf("/%d", i)
		c.watch.failed(&Response{Request: req, StatusCode: 500}, &HTTPError{StatusCode: 500})
	}
	got := c.RecentFailures()
	if len(got) != maxRecentFailures || got[0].URL != "http://h.example/249" || got[99].URL != "http://h.example/150" {
		t.Errorf("RecentFailures: %d, first %s, last %s", len(got), got[0].URL, got[len(got)-1].URL)
	}
	if n := c.watch.failures.kindCounts()[FailHTTP]; n != 250 {
		t.Errorf("counted %d http failures, want 250", n)
	}
}

// TestHostReportsDelayWait: a host waiting out its Delay with a request
// parked shows the wait and its end.
func TestHostReportsDelayWait(t *testing.T) {
	s := newPauseSite(t, 1)
	close(s.release)
	c := NewCollector(IgnoreRobotsTxt(), Async())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/p/0", "/p/1"} {
		if err := c.Visit(s.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, s.arrived, "the first request")
	deadline := time.Now().Add(10 * time.Second)
	var h HostReport
	for time.Now().Before(deadline) {
		if hs := c.HostReports(0); len(hs) == 1 && hs[0].WaitReason != "" && hs[0].Done == 1 {
			h = hs[0]
			break
		}
		runtime.Gosched()
	}
	if h.WaitReason != "delay" || time.Until(h.WaitUntil) < 50*time.Minute || h.Queued != 1 {
		t.Errorf("HostReports() = %+v, want a delay wait of about an hour, 1 queued", h)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}
