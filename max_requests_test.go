package magpie

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Issue 40 point 11: once MaxRequests is spent, a link to a page already
// fetched is refused as already visited, not as over the budget: the
// refusals counted under max_requests are the pages the budget kept out.
// The home page links to itself, /a, /b and /c, and /a back home; with a
// budget of 2, / and /a are fetched, /b and /c refused (ErrMaxRequests),
// and both links home are already visited.
func TestMaxRequestsVisitedLinks(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<a href="/">home</a><a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>`)
		case "/a":
			fmt.Fprint(w, `<a href="/">home</a>`)
		default:
			fmt.Fprint(w, `page`)
		}
	}))
	defer ts.Close()
	for _, heard := range []bool{false, true} {
		t.Run(fmt.Sprintf("OnRefused=%v", heard), func(t *testing.T) {
			c := NewCollector(MaxRequests(2), IgnoreRobotsTxt())
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			var overBudget, visited int
			if heard {
				c.OnRefused(func(_ *Request, err error) {
					if errors.Is(err, ErrMaxRequests) {
						overBudget++
					}
					if _, ok := errors.AsType[*AlreadyVisitedError](err); ok {
						visited++
					}
				})
			}
			if err := c.Visit(ts.URL + "/"); err != nil {
				t.Fatalf("Visit() error = %v", err)
			}
			st := c.Stats()
			if st.Refused[RefusedMaxRequests] != 2 || st.Refused[RefusedVisited] != 2 {
				t.Errorf("Stats().Refused = %v, want %s 2 (/b, /c) and %s 2 (the links home)", st.Refused, RefusedMaxRequests, RefusedVisited)
			}
			if heard && (overBudget != 2 || visited != 2) {
				t.Errorf("OnRefused: %d ErrMaxRequests, %d AlreadyVisited; want 2 and 2", overBudget, visited)
			}
		})
	}
}
