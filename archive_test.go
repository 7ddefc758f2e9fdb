package magpie

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// spyArchiver keeps a copy of every exchange it is given.
type spyArchiver struct {
	mu  sync.Mutex
	got []string // "scheme ip | request head | response bytes"
}

func (s *spyArchiver) ArchiveExchange(x *WireExchange) error {
	req, _ := io.ReadAll(x.Request.NewReader())
	resp, _ := io.ReadAll(x.Response.NewReader())
	if int64(len(req)) != x.Request.Len() || int64(len(resp)) != x.Response.Len() {
		return fmt.Errorf("Len() %d/%d, read %d/%d", x.Request.Len(), x.Response.Len(), len(req), len(resp))
	}
	head, _, _ := strings.Cut(string(req), "\r\n")
	s.mu.Lock()
	s.got = append(s.got, x.Scheme+" "+x.RemoteAddr+" | "+head+" | "+string(resp))
	s.mu.Unlock()
	return nil
}

// TestArchiverSeesTheWire checks that WithArchiver hands over robots.txt, a
// redirect hop and the page it led to, each as the bytes on the wire: the
// gzip body still compressed, the callbacks still given the decoded page.
func TestArchiverSeesTheWire(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	fmt.Fprint(zw, "<html><title>Deep</title></html>")
	_ = zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\n")
		case "/old":
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
		case "/new":
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped.Bytes())
		}
	}))
	defer srv.Close()
	spy := &spyArchiver{}
	c := NewCollector(WithArchiver(spy))
	var title string
	c.OnHTML("title", func(e *HTMLElement) { title = e.Text })
	if err := c.Visit(srv.URL + "/old"); err != nil {
		t.Fatal(err)
	}
	if title != "Deep" {
		t.Errorf("OnHTML saw title %q, want the decoded page's", title)
	}
	if len(spy.got) != 3 {
		t.Fatalf("archived %d exchanges, want 3 (robots.txt, /old, /new): %q", len(spy.got), spy.got)
	}
	for i, want := range []string{"GET /robots.txt HTTP/1.1", "GET /old HTTP/1.1", "GET /new HTTP/1.1"} {
		if !strings.HasPrefix(spy.got[i], "http 127.0.0.1 | "+want+" | HTTP/1.1 ") {
			t.Errorf("exchange %d = %.80q, want %q from 127.0.0.1", i, spy.got[i], want)
		}
	}
	if !strings.Contains(spy.got[1], "HTTP/1.1 301 ") {
		t.Errorf("redirect hop archived as %.80q", spy.got[1])
	}
	if !strings.HasSuffix(spy.got[2], "\r\n\r\n"+zipped.String()) {
		t.Errorf("the gzip body was not archived as sent: %q", spy.got[2])
	}
}

// roundTripFunc is a RoundTripper of the user's own (not an
// *http.Transport), whose connections magpie does not dial.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestUnarchivedExchangesAreLogged checks that an exchange the Archiver
// cannot be given (sent through a RoundTripper of the user's) is not lost
// silently: each is logged at Warn, with its URL.
func TestUnarchivedExchangesAreLogged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html><title>Mine</title></html>")
	}))
	defer srv.Close()
	var (
		logMu sync.Mutex
		logs  strings.Builder
	)
	spy := &spyArchiver{}
	c := NewCollector(WithArchiver(spy), IgnoreRobotsTxt(),
		Logger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))))
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	c.WithTransport(roundTripFunc(base.RoundTrip))
	for _, p := range []string{"/one", "/two"} {
		if err := c.Visit(srv.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	if len(spy.got) != 0 {
		t.Errorf("archived %q through a RoundTripper magpie does not see into", spy.got)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, p := range []string{"/one", "/two"} {
		if !strings.Contains(logs.String(), `level=WARN msg="exchange not archived`) || !strings.Contains(logs.String(), "url="+srv.URL+p) {
			t.Errorf("no Warn for %s in the log:\n%s", p, logs.String())
		}
	}
}

// captureSpy is an Archiver that reports each 2xx exchange as archived in
// a record named after the order it came in, and keeps the Original of
// each 304.
type captureSpy struct {
	mu        sync.Mutex
	n         int
	originals []storage.Capture
}

func (s *captureSpy) ArchiveExchange(x *WireExchange) error {
	resp, _ := io.ReadAll(x.Response.NewReader())
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case bytes.HasPrefix(resp, []byte("HTTP/1.1 304 ")):
		s.originals = append(s.originals, x.Original)
		x.Archived = x.Original
	case bytes.HasPrefix(resp, []byte("HTTP/1.1 200 ")):
		s.n++
		x.Archived = storage.Capture{RecordID: fmt.Sprintf("rec-%d", s.n), URI: "http://archived/", Date: time.Unix(1, int64(s.n)), PayloadDigest: "sha1:X"}
	}
	return nil
}

// TestRecrawlKeepsTheArchivedCapture checks that a recrawl keeps, in each
// page's state, the capture the Archiver reported for its 200, and hands
// it to the Archiver as the Original of the page's later 304; a 200 with
// the same body fetched while not archiving keeps it too.
func TestRecrawlKeepsTheArchivedCapture(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/p" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "<html>the page</html>")
	}))
	defer srv.Close()
	store := &storage.InMemoryStorage{}
	capture := func() storage.Capture {
		t.Helper()
		for p, err := range store.DuePages(t.Context(), time.Now().Add(time.Hour)) {
			if err != nil {
				t.Fatal(err)
			}
			if p.State.URL == srv.URL+"/p" {
				return p.State.Capture
			}
		}
		t.Fatal("no state stored for /p")
		return storage.Capture{}
	}
	crawl := func(p RecrawlPolicy, opts ...CollectorOption) {
		t.Helper()
		c := NewCollector(append(opts, Recrawl(p), IgnoreRobotsTxt())...)
		if err := c.SetStorage(store); err != nil {
			t.Fatal(err)
		}
		if err := c.Visit(srv.URL + "/p"); err != nil {
			t.Fatal(err)
		}
	}
	spy := &captureSpy{}
	crawl(RecrawlPolicy{}, WithArchiver(spy)) // 200, archived as rec-1
	if c := capture(); c.RecordID != "rec-1" || c.URI != "http://archived/" || !c.Date.Equal(time.Unix(1, 1)) {
		t.Fatalf("state after the 200: capture %+v, want rec-1's", c)
	}
	crawl(RecrawlPolicy{}, WithArchiver(spy)) // 304
	if len(spy.originals) != 1 || spy.originals[0].RecordID != "rec-1" {
		t.Errorf("the 304's Original = %+v, want rec-1", spy.originals)
	}
	crawl(RecrawlPolicy{Refetch: true}) // 200, same body, not archived
	if c := capture(); c.RecordID != "rec-1" {
		t.Errorf("state after an unarchived 200 of the same body: capture %+v, want rec-1's kept", c)
	}
}
