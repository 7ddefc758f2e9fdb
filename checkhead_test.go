package magpie

import (
	"net/http"
	"slices"
	"sync"
	"testing"
)

// TestCheckHeadOnResponseSeesHead: with CheckHead, OnResponse gets the HEAD
// response first, then the GET's, as in Colly; an Abort there stops the GET.
func TestCheckHeadOnResponseSeesHead(t *testing.T) {
	ts := newTestServer(t)
	c := NewCollector(CheckHead(), IgnoreRobotsTxt())
	var mu sync.Mutex
	var seen []string
	c.OnResponse(func(r *Response) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Request.Method+" "+r.Request.URL.Path)
		if r.Request.Method == http.MethodHead {
			if r.StatusCode != http.StatusOK || len(r.Body) != 0 {
				t.Errorf("HEAD response: status %d, %d body bytes; want 200 and none", r.StatusCode, len(r.Body))
			}
			if r.Request.URL.Path == "/b" {
				r.Request.Abort()
			}
		}
	})
	for _, p := range []string{"/a", "/b"} {
		if err := c.Visit(ts.URL + p); err != nil {
			t.Fatalf("Visit(%s) error = %v", p, err)
		}
	}
	want := []string{"HEAD /a", "GET /a", "HEAD /b"}
	if !slices.Equal(seen, want) {
		t.Errorf("OnResponse saw %v, want %v", seen, want)
	}
	if n := ts.count("/b"); n != 1 {
		t.Errorf("/b reached the server %d times, want 1 (the HEAD; Abort stops the GET)", n)
	}
}
