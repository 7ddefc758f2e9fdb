package proxy_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/proxy"
)

// TestRoundRobinProxySwitcherRedactsPassword: a proxy URL with user:pass
// still authenticates to the proxy, but Request.ProxyURL, which callbacks
// log and export, carries "xxxxx" in place of the password.
func TestRoundRobinProxySwitcherRedactsPassword(t *testing.T) {
	var mu sync.Mutex
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Proxy-Authorization")
		mu.Unlock()
		w.Write([]byte("proxied"))
	}))
	defer srv.Close()
	proxyURL := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)
	fn, err := proxy.RoundRobinProxySwitcher(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	c.SetProxyFunc(fn)
	var got string
	c.OnResponse(func(r *magpie.Response) { got = r.Request.ProxyURL })
	if err := c.Visit("http://target.test/page"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	want := strings.Replace(srv.URL, "http://", "http://user:xxxxx@", 1)
	if got != want {
		t.Errorf("Request.ProxyURL = %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:s3cret")); auth != wantAuth {
		t.Errorf("the proxy got Proxy-Authorization %q, want %q", auth, wantAuth)
	}
}
