package extensions

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
)

// TestRefererPolicy: strict-origin-when-cross-origin, as browsers send it:
// the full URL within an origin, the origin alone across origins, nothing
// from an https page to an http URL.
func TestRefererPolicy(t *testing.T) {
	other := newSite(t, nil)
	var mu sync.Mutex
	seen := map[string]string{}
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Referer")
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/tpage" {
			fmt.Fprintf(w, `<a href="/t-same">s</a><a href="%s/from-https">d</a>`, other.URL)
		}
	}))
	defer tlsSrv.Close()
	plain := newSite(t, map[string][]string{"/page": {"/same", other.URL + "/from-http"}})

	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	c.WithTransport(tlsSrv.Client().Transport)
	Referer(c)
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	for _, u := range []string{plain.URL + "/page?q=1#frag", tlsSrv.URL + "/tpage"} {
		if err := c.Visit(u); err != nil {
			t.Fatalf("Visit(%q) error = %v", u, err)
		}
	}
	referers := func(s *site, path string) string {
		hs := s.headers(path)
		if len(hs) != 1 {
			t.Errorf("%s fetched %d times, want 1", path, len(hs))
			return "<none>"
		}
		return hs[0].Get("Referer")
	}
	mu.Lock()
	defer mu.Unlock()
	tests := []struct{ name, got, want string }{
		{"same origin, http", referers(plain, "/same"), plain.URL + "/page?q=1"},
		{"cross origin, http to http", referers(other, "/from-http"), plain.URL + "/"},
		{"same origin, https", seen["/t-same"], tlsSrv.URL + "/tpage"},
		{"downgrade, https to http", referers(other, "/from-https"), ""},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: Referer = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
