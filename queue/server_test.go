package queue_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
)

// site is a test web site: /p/N is an HTML page linking to the pages links(N)
// returns; every fetch of a /p/ path is counted. Other paths (robots.txt)
// are 404 and not counted.
type site struct {
	*httptest.Server
	links func(n int) []int
	// block, when set, is waited on by every page handler before it answers.
	block chan struct{}
	// entered, when set, receives a value as each page handler starts.
	entered chan struct{}

	mu     sync.Mutex // guards counts
	counts map[string]int
}

// newTestServer starts a site on 127.0.0.1 whose page N links to links(N)
// (nil: no links); it is closed by t.Cleanup.
func newTestServer(t *testing.T, links func(n int) []int) *site {
	t.Helper()
	s := &site{links: links, counts: make(map[string]int)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/p/")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.counts[r.URL.Path]++
	s.mu.Unlock()
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<html><body><h1>page %d</h1>", n)
	if s.links != nil {
		for _, l := range s.links(n) {
			fmt.Fprintf(&b, `<a href="/p/%d">%d</a>`, l, l)
		}
	}
	b.WriteString("</body></html>")
	_, _ = w.Write([]byte(b.String()))
}

func (s *site) page(n int) string { return fmt.Sprintf("%s/p/%d", s.URL, n) }

// fetches returns a copy of the per-path fetch counts.
func (s *site) fetches() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

func (s *site) total() int {
	n := 0
	for _, v := range s.fetches() {
		n += v
	}
	return n
}

// href is the element's href attribute.
func href(e *magpie.HTMLElement) string {
	h, _ := e.DOM.Attr("href")
	return h
}
