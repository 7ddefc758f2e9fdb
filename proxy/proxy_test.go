package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/proxy"
)

// newProxyServer starts an HTTP forward proxy stand-in: it answers every
// proxied request itself with its name and the target it was asked for.
func newProxyServer(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		io.WriteString(w, name+" "+r.URL.String())
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRoundRobinProxySwitcherThroughProxies(t *testing.T) {
	p1, p2 := newProxyServer(t, "p1"), newProxyServer(t, "p2")
	fn, err := proxy.RoundRobinProxySwitcher(p1.URL, p2.URL)
	if err != nil {
		t.Fatalf("RoundRobinProxySwitcher() error = %v", err)
	}
	tr := &http.Transport{Proxy: fn, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	want := []struct{ body, proxy string }{
		{"p1 http://target.test/page", p1.URL},
		{"p2 http://target.test/page", p2.URL},
		{"p1 http://target.test/page", p1.URL},
		{"p2 http://target.test/page", p2.URL},
	}
	for i, w := range want {
		box := new(string)
		ctx := context.WithValue(t.Context(), magpie.ProxyURLKey, box)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://target.test/page", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: Do() error = %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != w.body {
			t.Errorf("request %d went through %q, want %q", i, body, w.body)
		}
		if *box != w.proxy {
			t.Errorf("request %d reported proxy %q, want %q", i, *box, w.proxy)
		}
	}
}

func TestRoundRobinProxySwitcherErrors(t *testing.T) {
	tests := []struct {
		name string
		urls []string
		want error
	}{
		{"none", nil, magpie.ErrEmptyProxyURL},
		{"bad scheme", []string{"ftp://proxy:21"}, proxy.ErrInvalidProxyURL},
		{"no scheme", []string{"proxy.example.com:8080"}, proxy.ErrInvalidProxyURL},
		{"no host", []string{"http://"}, proxy.ErrInvalidProxyURL},
		{"unparsable", []string{"http://[::1"}, proxy.ErrInvalidProxyURL},
		{"one bad among good", []string{"http://a:1", "gopher://b:2"}, proxy.ErrInvalidProxyURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := proxy.RoundRobinProxySwitcher(tt.urls...)
			if !errors.Is(err, tt.want) || fn != nil {
				t.Errorf("RoundRobinProxySwitcher(%q) = %v, %v; want nil, %v", tt.urls, fn != nil, err, tt.want)
			}
		})
	}
	var uerr *url.Error
	if _, err := proxy.RoundRobinProxySwitcher("http://[::1"); !errors.As(err, &uerr) {
		t.Errorf("RoundRobinProxySwitcher(unparsable) error = %v, want it to wrap the *url.Error", err)
	}
}

func TestRoundRobinProxySwitcherSchemes(t *testing.T) {
	urls := []string{"http://a:1", "https://user:pw@b:2", "socks5://c:3", "SOCKS5H://d:4"}
	fn, err := proxy.RoundRobinProxySwitcher(urls...)
	if err != nil {
		t.Fatalf("RoundRobinProxySwitcher(%q) error = %v", urls, err)
	}
	req := httptest.NewRequest(http.MethodGet, "http://x/", nil) // no box: must not fail
	for i := range 2 * len(urls) {
		u, err := fn(req)
		if err != nil {
			t.Fatalf("call %d error = %v", i, err)
		}
		want, _ := url.Parse(urls[i%len(urls)])
		if u.String() != want.String() {
			t.Errorf("call %d = %q, want %q", i, u, want)
		}
		u.Host = "tampered" // the switcher's list must not change
	}
	if u, _ := fn(req); u.Host != "a:1" {
		t.Errorf("after callers modified results, next = %q, want host a:1", u)
	}
}

func TestRoundRobinProxySwitcherConcurrent(t *testing.T) {
	urls := []string{"http://a:1", "http://b:2", "http://c:3"}
	fn, err := proxy.RoundRobinProxySwitcher(urls...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
			for range 100 {
				u, _ := fn(req)
				mu.Lock()
				counts[u.Host]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, h := range []string{"a:1", "b:2", "c:3"} {
		if counts[h] != 200 {
			t.Errorf("proxy %s chosen %d times out of 600, want 200", h, counts[h])
		}
	}
}

func ExampleRoundRobinProxySwitcher() {
	fn, err := proxy.RoundRobinProxySwitcher("http://127.0.0.1:8081", "socks5://127.0.0.1:1080")
	if err != nil {
		fmt.Println(err)
		return
	}
	// A Collector would take it with c.SetProxyFunc(fn); here we ask it directly.
	req, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	for range 3 {
		u, _ := fn(req)
		fmt.Println(u)
	}
	// Output:
	// http://127.0.0.1:8081
	// socks5://127.0.0.1:1080
	// http://127.0.0.1:8081
}
