package magpie

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestRedirectHandlerBeforeRobotsAndVisited: a redirect the handler refuses
// fetches no robots.txt on the target's host and marks the target nothing:
// a later Visit of it is admitted and fetched.
func TestRedirectHandlerBeforeRobotsAndVisited(t *testing.T) {
	var robots, pages atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robots.Add(1)
			http.NotFound(w, r)
			return
		}
		pages.Add(1)
	}))
	t.Cleanup(target.Close)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, target.URL+"/x", http.StatusFound)
	}))
	t.Cleanup(origin.Close)
	refused := errors.New("not there")
	c := NewCollector()
	c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return refused })
	if err := c.Visit(origin.URL + "/go"); !errors.Is(err, refused) {
		t.Fatalf("Visit(/go) error = %v, want the handler's %v", err, refused)
	}
	if n := robots.Load(); n != 0 {
		t.Errorf("robots.txt of the refused redirect's host fetched %d times, want 0", n)
	}
	if err := c.Visit(target.URL + "/x"); err != nil {
		t.Fatalf("Visit(target) after the refused redirect error = %v, want it admitted", err)
	}
	if n := pages.Load(); n != 1 {
		t.Errorf("target fetched %d times, want 1", n)
	}
}
