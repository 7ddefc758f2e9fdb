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

// TestRedirectHandlerUseLastResponse: a handler returning
// http.ErrUseLastResponse gets the 3xx as the response, as
// http.Client.CheckRedirect does. With ParseHTTPErrorResponse it reaches
// OnResponse, body and Location included, and the target is not fetched
// nor marked visited.
func TestRedirectHandlerUseLastResponse(t *testing.T) {
	var targets atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old":
			w.Header().Set("Location", "/new")
			w.WriteHeader(http.StatusMovedPermanently)
			_, _ = w.Write([]byte("moved"))
		case "/new":
			targets.Add(1)
		}
	}))
	t.Cleanup(ts.Close)
	c := NewCollector(IgnoreRobotsTxt(), ParseHTTPErrorResponse())
	c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })
	var got *Response
	c.OnResponse(func(r *Response) { got = r })
	c.OnError(func(r *Response, err error) { t.Errorf("OnError(%v), want OnResponse", err) })
	if err := c.Visit(ts.URL + "/old"); err != nil {
		t.Fatalf("Visit(/old) error = %v, want nil", err)
	}
	if got == nil {
		t.Fatal("OnResponse not called")
	}
	if got.StatusCode != http.StatusMovedPermanently || got.Headers.Get("Location") != "/new" ||
		string(got.Body) != "moved" || got.Request.URL.Path != "/old" {
		t.Errorf("response = %d Location %q body %q URL %s, want 301 /new \"moved\" /old",
			got.StatusCode, got.Headers.Get("Location"), got.Body, got.Request.URL.Path)
	}
	if n := targets.Load(); n != 0 {
		t.Errorf("/new fetched %d times, want 0", n)
	}
	if v, err := c.HasVisited(ts.URL + "/new"); err != nil || v {
		t.Errorf("HasVisited(/new) = %v, %v, want false", v, err)
	}
}
