package magpie

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStatsSnapshot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/x">x</a><a href="/missing">m</a><a href="/fail">f</a><a href="#top">t</a>`)
		case "/x":
			fmt.Fprint(w, "0123456789")
		case "/fail":
			http.Error(w, "down", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := NewCollector(RetryPolicy(RetryOptions{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	_ = c.Visit(srv.URL + "/")
	st := c.Stats()
	if st.StatusCodes[200] != 2 || st.StatusCodes[404] != 1 || st.StatusCodes[503] != 2 ||
		st.StatusClasses["2xx"] != 2 || st.StatusClasses["4xx"] != 1 || st.StatusClasses["5xx"] != 2 {
		t.Errorf("status counts %v / %v, want 200:2 404:1 503:2", st.StatusCodes, st.StatusClasses)
	}
	if st.Retries != 1 || st.RobotsFetches != 1 || st.FragmentLinks != 1 || st.Elapsed <= 0 || st.PagesPerSecond <= 0 {
		t.Errorf("retries %d, robots %d, fragments %d, elapsed %v, pages/s %f; want 1, 1, 1 and positive",
			st.Retries, st.RobotsFetches, st.FragmentLinks, st.Elapsed, st.PagesPerSecond)
	}
	if st.Bytes < 10 {
		t.Errorf("bytes = %d, want the bodies counted", st.Bytes)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"requests":`, `"status_codes":{`, `"items_scraped":`, `"pages_per_second":`, `"refused":`} {
		if !strings.Contains(string(data), k) {
			t.Errorf("JSON %s lacks %s", data, k)
		}
	}
	// Requests counts every try sent: four pages, /fail twice.
	if s := st.String(); !strings.Contains(s, "requests 5, responses 5 (2xx 2, 4xx 1, 5xx 2)") {
		t.Errorf("String() = %q", s)
	}
}

// progressHandler records progress lines and closes first on the first.
type progressHandler struct {
	mu    sync.Mutex
	lines []slog.Record
	first chan struct{}
	once  sync.Once
}

func (h *progressHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *progressHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *progressHandler) WithGroup(string) slog.Handler            { return h }
func (h *progressHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "progress" {
		h.mu.Lock()
		h.lines = append(h.lines, r)
		h.mu.Unlock()
		h.once.Do(func() { close(h.first) })
	}
	return nil
}

func TestProgressInterval(t *testing.T) {
	h := &progressHandler{first: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			// Answers only once a progress line has been logged.
			select {
			case <-h.first:
			case <-time.After(20 * time.Second):
			}
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	c := NewCollector(IgnoreRobotsTxt(), Logger(slog.New(h)), ProgressInterval(5*time.Millisecond))
	if err := c.Visit(srv.URL + "/slow"); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	n := len(h.lines)
	var keys []string
	if n > 0 {
		h.lines[0].Attrs(func(a slog.Attr) bool { keys = append(keys, a.Key); return true })
	}
	h.mu.Unlock()
	if n == 0 || strings.Join(keys, ",") != "pages,pages_per_s,pending,items,errors" {
		t.Errorf("progress lines %d with attributes %v", n, keys)
	}
	quiet := &progressHandler{first: make(chan struct{})}
	c2 := NewCollector(IgnoreRobotsTxt(), Logger(slog.New(quiet)))
	_ = c2.Visit(srv.URL + "/fast")
	if len(quiet.lines) != 0 {
		t.Error("a progress line without ProgressInterval")
	}
}
