package debug_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/debug"
)

func newSite(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/a">a</a><a href="/b">b</a><a href="/fail">fail</a>`)
		case "/a", "/b":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<p>leaf</p>`)
		default:
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func crawl(t *testing.T, d debug.Debugger, start string) {
	t.Helper()
	c := magpie.NewCollector(magpie.Async(), magpie.Debugger(d), magpie.IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(start); err != nil {
		t.Fatalf("Visit(%q) error = %v", start, err)
	}
	c.Wait()
}

func TestLogDebuggerWritesOneLinePerEvent(t *testing.T) {
	srv := newSite(t)
	var buf bytes.Buffer
	crawl(t, &debug.LogDebugger{Output: &buf, Prefix: "dbg "}, srv.URL+"/")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// 4 requests (/, /a, /b, /fail): request, requestHeaders, responseHeaders,
	// then response+scraped or error; plus 3 html events on /.
	if len(lines) < 4*4 {
		t.Fatalf("got %d lines, want at least 16:\n%s", len(lines), buf.String())
	}
	var errors, scraped int
	for i, l := range lines {
		if !strings.HasPrefix(l, "dbg [") {
			t.Errorf("line %d = %q, want the prefix and a counter", i, l)
		}
		if !strings.Contains(l, fmt.Sprintf("[%06d]", i+1)) {
			t.Errorf("line %d = %q, want counter %06d", i, l, i+1)
		}
		if strings.Contains(l, " - error] ") {
			errors++
			if !strings.Contains(l, `status="500"`) || !strings.Contains(l, `url="`+srv.URL+`/fail"`) {
				t.Errorf("error line %q lacks status or url", l)
			}
		}
		if strings.Contains(l, " - scraped] ") {
			scraped++
		}
	}
	if errors != 1 || scraped != 3 {
		t.Errorf("got %d error and %d scraped lines, want 1 and 3:\n%s", errors, scraped, buf.String())
	}
}

func getStatus(t *testing.T, addr string) debug.WebStatus {
	t.Helper()
	res, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	defer res.Body.Close()
	var st debug.WebStatus
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatalf("decoding /status: %v", err)
	}
	return st
}

func TestWebDebuggerServesRequests(t *testing.T) {
	srv := newSite(t)
	w := &debug.WebDebugger{Address: "127.0.0.1:0"}
	crawl(t, w, srv.URL+"/")
	defer w.Close()

	st := getStatus(t, w.Addr())
	if st.Finished != 4 || len(st.Recent) != 4 || len(st.Current) != 0 {
		t.Fatalf("status = %d finished, %d recent, %d current; want 4, 4, 0", st.Finished, len(st.Recent), len(st.Current))
	}
	var failed int
	for _, r := range st.Recent {
		if !strings.HasPrefix(r.URL, srv.URL) || r.Method != http.MethodGet {
			t.Errorf("record %+v: want a GET of the site", r)
		}
		if r.Error != "" {
			failed++
			if r.Status != "500" {
				t.Errorf("failed record status = %q, want 500", r.Status)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failed records, want 1", failed)
	}

	res, err := http.Get("http://" + w.Addr() + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !bytes.Contains(page, []byte("/status")) {
		t.Errorf("GET / = %q with %d bytes, want the HTML page that polls /status", ct, len(page))
	}
}

func TestWebDebuggerKeepsABoundedLog(t *testing.T) {
	w := &debug.WebDebugger{Recent: 3}
	for i := range 10 {
		id := uint32(i + 1)
		w.Event(&debug.Event{Type: debug.EventRequest, RequestID: id, Values: map[string]string{"url": fmt.Sprint("/", id)}})
		w.Event(&debug.Event{Type: debug.EventResponse, RequestID: id, Values: map[string]string{"url": fmt.Sprint("/", id), "status": "200"}})
	}
	st := w.Status()
	if st.Finished != 10 || len(st.Recent) != 3 {
		t.Fatalf("Finished = %d, len(Recent) = %d; want 10 and 3", st.Finished, len(st.Recent))
	}
	for i, want := range []string{"/10", "/9", "/8"} {
		if st.Recent[i].URL != want {
			t.Errorf("Recent[%d].URL = %q, want %q (newest first)", i, st.Recent[i].URL, want)
		}
	}
}

func TestWebDebuggerCloseStopsServing(t *testing.T) {
	w := &debug.WebDebugger{Address: "127.0.0.1:0"}
	if err := w.Init(); err != nil {
		t.Fatalf("Init() error = %v", err)
	}
	addr := w.Addr()
	_ = getStatus(t, addr)
	http.DefaultClient.CloseIdleConnections()
	if err := w.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if _, err := http.Get("http://" + addr + "/status"); err == nil {
		t.Error("GET /status after Close succeeded")
	}
	if err := w.Init(); err != debug.ErrWebDebuggerClosed {
		t.Errorf("Init after Close = %v, want ErrWebDebuggerClosed", err)
	}
}

func TestWebDebuggerInitFailsOnBusyAddress(t *testing.T) {
	a := &debug.WebDebugger{Address: "127.0.0.1:0"}
	if err := a.Init(); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := &debug.WebDebugger{Address: a.Addr()}
	if err := b.Init(); err == nil {
		b.Close()
		t.Fatal("Init on an address in use succeeded")
	}
}
