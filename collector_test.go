package magpie

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestVisitOnHTMLSync(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	var mu sync.Mutex
	var got []string
	c.OnHTML("p.x", func(e *HTMLElement) {
		mu.Lock()
		got = append(got, e.Text)
		mu.Unlock()
	})
	if err := c.Visit(ts.URL + "/html"); err != nil {
		t.Fatalf("Visit(/html) error = %v, want nil", err)
	}
	if want := []string{"one", "two"}; !slices.Equal(got, want) {
		t.Errorf("OnHTML texts = %q, want %q", got, want)
	}
}

func TestRecursiveCrawl(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "async"}[async], func(t *testing.T) {
			ts := newTestServer(t)
			c := NewCollector(Async(async), Workers(1))
			var mu sync.Mutex
			var visited []string
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.DOM.AttrOr("href", "")) })
			c.OnResponse(func(r *Response) {
				mu.Lock()
				visited = append(visited, r.Request.URL.RequestURI())
				mu.Unlock()
			})
			if err := c.Visit(ts.URL + "/"); err != nil {
				t.Fatalf("Visit(/) error = %v", err)
			}
			c.Wait()
			slices.Sort(visited)
			want := []string{"/", "/a", "/b", "/c", "/leaf?from=a", "/leaf?from=b", "/leaf?from=c"}
			if !slices.Equal(visited, want) {
				t.Errorf("visited = %q, want %q", visited, want)
			}
		})
	}
}

func TestVisitErrors(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector()
	var he *HTTPError
	if err := c.Visit(ts.URL + "/404"); !errors.As(err, &he) || he.StatusCode != 404 {
		t.Errorf("Visit(/404) error = %v, want *HTTPError 404", err)
	}
	if err := c.Visit(ts.URL + "/html"); err != nil {
		t.Fatalf("Visit(/html) error = %v", err)
	}
	var ave *AlreadyVisitedError
	if err := c.Visit(ts.URL + "/html"); !errors.As(err, &ave) {
		t.Errorf("second Visit(/html) error = %v, want *AlreadyVisitedError", err)
	}
}
