package magpie

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestDomainsMatchIDNA: AllowedDomains and DisallowedDomains written in
// Unicode or in punycode match links written either way (links reach
// admission in their ASCII form).
func TestDomainsMatchIDNA(t *testing.T) {
	var mu sync.Mutex
	fetched := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.Host+r.URL.Path] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<a href="http://bücher.test/unicode">u</a><a href="http://xn--bcher-kva.test/puny">p</a>`)
		}
	}))
	defer srv.Close()
	// Every name resolves to the test server.
	var d net.Dialer
	transport := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	defer transport.CloseIdleConnections()

	tests := []struct {
		name    string
		opt     CollectorOption
		start   string
		want    []string
		refused int
	}{
		{"allowed in Unicode", AllowedDomains("bücher.test"), "http://bücher.test/",
			[]string{"xn--bcher-kva.test/", "xn--bcher-kva.test/unicode", "xn--bcher-kva.test/puny"}, 0},
		{"allowed in upper-case Unicode", AllowedDomains("BÜCHER.test"), "http://xn--bcher-kva.test/",
			[]string{"xn--bcher-kva.test/", "xn--bcher-kva.test/unicode", "xn--bcher-kva.test/puny"}, 0},
		{"allowed in punycode, Unicode start", AllowedDomains("xn--bcher-kva.test"), "http://bücher.test/",
			[]string{"xn--bcher-kva.test/", "xn--bcher-kva.test/unicode", "xn--bcher-kva.test/puny"}, 0},
		{"disallowed in Unicode", DisallowedDomains("bücher.test"), "http://other.test/",
			[]string{"other.test/"}, 2},
		// Lists longer than domainSetScan are matched through a set.
		{"allowed among many", AllowedDomains(manyDomains("BÜCHER.test:8080")...), "http://xn--bcher-kva.test/",
			[]string{"xn--bcher-kva.test/", "xn--bcher-kva.test/unicode", "xn--bcher-kva.test/puny"}, 0},
		{"not allowed among many", AllowedDomains(manyDomains("other.test")...), "http://other.test/",
			[]string{"other.test/"}, 2},
		{"disallowed among many", DisallowedDomains(manyDomains("[xn--bcher-kva.test]")...), "http://other.test/",
			[]string{"other.test/"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			clear(fetched)
			mu.Unlock()
			c := NewCollector(tc.opt, IgnoreRobotsTxt())
			c.WithTransport(transport)
			var refused int
			c.OnRefused(func(_ *Request, err error) {
				if errors.Is(err, ErrForbiddenDomain) {
					refused++
				}
			})
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			if err := c.Visit(tc.start); err != nil {
				t.Fatalf("Visit(%q) error = %v", tc.start, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, w := range tc.want {
				if !fetched[w] {
					t.Errorf("%s not fetched; fetched %v", w, fetched)
				}
			}
			if len(fetched) != len(tc.want) || refused != tc.refused {
				t.Errorf("fetched %v and refused %d as forbidden domains, want %v and %d", fetched, refused, tc.want, tc.refused)
			}
		})
	}
}

// CredentialHosts takes a Unicode host name as AllowedDomains does: a link's
// URL carries the punycode, which must match it.
func TestCredentialHostsIDNA(t *testing.T) {
	c := NewCollector(CredentialHosts("Bücher.test", "straße.test:8443"))
	for _, tc := range []struct {
		u    string
		want bool
	}{
		{"https://xn--bcher-kva.test/a", true},
		{"https://xn--bcher-kva.test:9000/a", true},
		{"https://xn--strae-oqa.test:8443/", true},
		{"https://xn--strae-oqa.test/", false},
		{"https://other.test/", false},
	} {
		if got := c.shared.creds.allows(mustParse(t, tc.u)); got != tc.want {
			t.Errorf("credentials to %s allowed = %v, want %v", tc.u, got, tc.want)
		}
	}
}

// manyDomains is d among more names than domainSetScan.
func manyDomains(d string) []string {
	var ds []string
	for i := range 2 * domainSetScan {
		ds = append(ds, fmt.Sprintf("filler%d.test", i))
	}
	return append(ds, d)
}
