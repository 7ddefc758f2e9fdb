package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// crawledURLs are the "url"s of JSON lines output, sorted.
func crawledURLs(t *testing.T, stdout string) []string {
	t.Helper()
	return slices.Sorted(func(yield func(string) bool) {
		for u := range urlsOf(jsonLines(t, stdout)) {
			if !yield(u) {
				return
			}
		}
	})
}

// Issue 28 point 3: a start URL whose host redirects to another (apex →
// www, here 127.0.0.2 → 127.0.0.1) is followed under the default --scope
// host, and the crawl goes on where it landed, in memory and with --state;
// --depth counts links, not the redirect.
func TestCLIStartRedirectSetsScope(t *testing.T) {
	www := newPagesSite(t, 2, nil)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listening on a second loopback address: %v", err)
	}
	apex := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, www.URL+r.URL.Path, http.StatusMovedPermanently)
	}))
	apex.Listener = ln
	apex.Start()
	t.Cleanup(apex.Close)
	all := []string{www.URL + "/", www.URL + "/p/0", www.URL + "/p/1"}
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"memory", nil, all},
		{"state", []string{"--state", filepath.Join(t.TempDir(), "s.db")}, all},
		{"depth 1", []string{"--depth", "1"}, all[:1]},
		{"depth 2", []string{"--depth", "2"}, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", append([]string{"crawl", apex.URL + "/", "--allow-loopback", "-q"}, tc.flags...)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if got := crawledURLs(t, r.stdout); !slices.Equal(got, tc.want) {
				t.Errorf("crawled %q, want %q", got, tc.want)
			}
		})
	}
}

// vhosts is a forward proxy that serves made-up hosts itself:
//
//	shop.test/*            301 to www.shop.test (apex → www)
//	www.shop.test/         links to /a, /img, /up, /away
//	www.shop.test/img      302 to img.www.shop.test (a subdomain)
//	www.shop.test/up       302 to blog.shop.test (same registrable domain)
//	www.shop.test/away     302 to other.test (another site)
//	www.shop.test/robots.txt  names http://other.test/sitemap.xml, which
//	                          lists other.test/listed and www.shop.test/a
type vhosts struct {
	mu    sync.Mutex
	hosts map[string]int // requests by host
	urls  map[string]int // requests by URL
}

func newVhosts(t *testing.T) (*vhosts, *httptest.Server) {
	v := &vhosts{hosts: map[string]int{}, urls: map[string]int{}}
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return v, srv
}

func (v *vhosts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	v.mu.Lock()
	v.hosts[r.Host]++
	v.urls[r.URL.String()]++
	v.mu.Unlock()
	switch {
	case r.Host == "www.shop.test" && r.URL.Path == "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nAllow: /\nSitemap: http://other.test/sitemap.xml\n")
		return
	case r.URL.Path == "/robots.txt":
		http.NotFound(w, r)
		return
	case r.Host == "other.test" && r.URL.Path == "/sitemap.xml":
		fmt.Fprint(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`+
			`<url><loc>http://other.test/listed</loc></url><url><loc>http://www.shop.test/a</loc></url></urlset>`)
		return
	}
	redirects := map[string]string{
		"/img":  "http://img.www.shop.test/",
		"/up":   "http://blog.shop.test/",
		"/away": "http://other.test/",
	}
	switch {
	case r.Host == "shop.test":
		http.Redirect(w, r, "http://www.shop.test"+r.URL.Path, http.StatusMovedPermanently)
	case r.Host == "www.shop.test" && redirects[r.URL.Path] != "":
		http.Redirect(w, r, redirects[r.URL.Path], http.StatusFound)
	case r.Host == "www.shop.test" && r.URL.Path == "/":
		fmt.Fprint(w, `<title>www</title><a href="/a">a</a><a href="/img">i</a><a href="/up">u</a><a href="/away">x</a>`)
	default:
		fmt.Fprintf(w, "<title>%s%s</title>", r.Host, r.URL.Path)
	}
}

func (v *vhosts) count(host string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hosts[host]
}

// Issue 28 point 3: through a --proxy on loopback, trusted without
// --allow-loopback and written as a URL or host:port, the apex redirects to
// www and the crawl stays on www; a redirect that leaves the scope fails
// with kind scope and a message that names the --scope value that would
// widen it (from the apex, subdomains takes in blog.shop.test; from www,
// only domain does).
func TestCLIProxyTrustedAndRedirectScope(t *testing.T) {
	for _, tc := range []struct {
		form, start string
		messages    map[string]string
	}{
		{"url", "http://shop.test/", map[string]string{
			"/img":  "img.www.shop.test is outside --scope host (--scope subdomains would include it)",
			"/up":   "blog.shop.test is outside --scope host (--scope subdomains would include it)",
			"/away": "other.test is outside --scope host (another site)",
		}},
		{"host:port", "http://www.shop.test/", map[string]string{
			"/img":  "img.www.shop.test is outside --scope host (--scope subdomains would include it)",
			"/up":   "blog.shop.test is outside --scope host (--scope domain would include it)",
			"/away": "other.test is outside --scope host (another site)",
		}},
	} {
		t.Run(tc.form, func(t *testing.T) {
			v, proxy := newVhosts(t)
			proxyArg := proxy.URL
			if tc.form == "host:port" {
				proxyArg = strings.TrimPrefix(proxy.URL, "http://")
			}
			errPath := filepath.Join(t.TempDir(), "errors.jsonl")
			r := cli(t, "", "crawl", tc.start, "--proxy", proxyArg, "--errors", errPath, "-v")
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if want, got := []string{"http://www.shop.test/", "http://www.shop.test/a"}, crawledURLs(t, r.stdout); !slices.Equal(got, want) {
				t.Errorf("crawled %q, want %q", got, want)
			}
			for _, host := range []string{"img.www.shop.test", "blog.shop.test", "other.test"} {
				if n := v.count(host); n != 0 {
					t.Errorf("%s fetched %d times: out of --scope host", host, n)
				}
			}
			got := readFailures(t, errPath)
			for path, msg := range tc.messages {
				f := got["http://www.shop.test"+path]
				if f.Kind != "scope" || !strings.Contains(f.Error, msg) || f.From != "http://www.shop.test/" {
					t.Errorf("--errors for %s = %+v, want kind scope, a message with %q, from http://www.shop.test/", path, f, msg)
				}
				if !strings.Contains(r.stderr, "failed: scope: http://www.shop.test"+path+" (from http://www.shop.test/): ") {
					t.Errorf("-v does not name the scope failure of %s:\n%s", path, r.stderr)
				}
			}
			if len(got) != 3 {
				t.Errorf("--errors has %d lines, want 3: %v", len(got), got)
			}
		})
	}
}

// Issue 28 point 3: a proxy that cannot be reached is named in the error,
// not only the start URL; no loopback advice is given for it.
func TestCLIProxyDownNamesTheProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	r := cli(t, "", "crawl", "http://shop.test/", "--proxy", addr, "-q", "--retries", "0")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	if want := "proxy http://" + addr + " (--proxy) cannot be reached"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not name the proxy (%q):\n%s", want, r.stderr)
	}
	if strings.Contains(r.stderr, "allow-loopback") || strings.Contains(r.stderr, "DenyPrivateNetworks") {
		t.Errorf("stderr gives loopback or Go advice for the user's own proxy:\n%s", r.stderr)
	}
}

// Issue 28 point 3: --insecure crawls a site with a self-signed
// certificate; without it the failure says which flag lifts it.
func TestCLIInsecure(t *testing.T) {
	secure := newTLSSite(t)
	r := cli(t, "", "crawl", secure.URL+"/", "--allow-loopback", "-q")
	if r.code != 1 || !strings.Contains(r.stderr, "certificate") || !strings.Contains(r.stderr, "--insecure") {
		t.Errorf("without --insecure: exit %d, stderr:\n%s\nwant 1, the certificate error and a hint naming --insecure", r.code, r.stderr)
	}
	r = cli(t, "", "crawl", secure.URL+"/", "--allow-loopback", "-q", "--insecure")
	if r.code != 0 {
		t.Fatalf("with --insecure: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if want, got := []string{secure.URL + "/"}, crawledURLs(t, r.stdout); !slices.Equal(got, want) {
		t.Errorf("crawled %q, want %q", got, want)
	}
}

// Issue 28 point 3: refusals speak flags, not Go: a private address names
// --allow-private (the guard refuses it before any packet is sent), a
// loopback one --allow-loopback, and a network given after --allow-private
// without "=" is a usage error that shows the spelling.
func TestCLIPrivateNetworkMessages(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		want, not []string
	}{
		{"intranet", []string{"http://10.255.255.1:9/"}, 1,
			[]string{"address 10.255.255.1 is in a private network", "--allow-private"}, []string{"DenyPrivateNetworks", "netip", "allow-loopback to"}},
		{"loopback", []string{site.URL + "/"}, 1,
			[]string{"address 127.0.0.1 is in a private network", "--allow-loopback"}, []string{"DenyPrivateNetworks", "netip"}},
		{"intranet allowed, loopback not", []string{site.URL + "/", "--allow-private"}, 1,
			[]string{"--allow-loopback"}, nil},
		{"loopback as a CIDR", []string{site.URL + "/", "--allow-private=127.0.0.0/8"}, 0, nil, nil},
		{"network without =", []string{"--allow-private", "10.0.0.0/8", site.URL + "/"}, 2,
			[]string{"--allow-private=10.0.0.0/8"}, nil},
		{"bad network", []string{site.URL + "/", "--allow-private=10.0.0.0/33"}, 2,
			[]string{"--allow-private", "10.0.0.0/33"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", append([]string{"crawl", "-q", "--ignore-robots", "--retries", "0"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(r.stderr, n) {
					t.Errorf("stderr holds %q:\n%s", n, r.stderr)
				}
			}
		})
	}
}

// Issue 28 point 3: what --allow-private lets through the guard: alone, the
// intranet ranges and nothing else; with values, those networks or
// addresses only.
func TestAllowPrivateFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		allowed []string
		refused []string
		config  string // a --config file's text
	}{
		{nil, []string{"172.16.0.1"}, []string{"127.0.0.1"}, "# a bare name in --config\nallow-private\n"},
		{[]string{"--allow-private"},
			[]string{"10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1", "fd00::1"},
			[]string{"172.32.0.1", "127.0.0.1", "::1", "169.254.1.1", "100.64.0.1"}, ""},
		{[]string{"--allow-private=192.168.1.0/24,10.9.9.9"},
			[]string{"192.168.1.7", "10.9.9.9"},
			[]string{"192.168.2.1", "10.9.9.8", "172.16.0.1"}, ""},
		{[]string{"--allow-private=intranet,100.64.1.1"},
			[]string{"10.1.2.3", "192.168.1.1", "100.64.1.1"},
			[]string{"100.64.1.2", "127.0.0.1"}, ""},
		{[]string{"--allow-private=10.0.0.0/8", "--allow-loopback"},
			[]string{"10.0.0.1", "127.0.0.1", "::1"},
			[]string{"192.168.0.1"}, ""},
	} {
		t.Run(strings.Join(tc.args, " ")+tc.config, func(t *testing.T) {
			cmd := newCrawlCommand()
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			if tc.config != "" {
				conf := filepath.Join(t.TempDir(), "crawl.conf")
				if err := os.WriteFile(conf, []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := applyConfigFile(cmd.Flags(), conf); err != nil {
					t.Fatal(err)
				}
			}
			loop, _ := cmd.Flags().GetBool("allow-loopback")
			private, _ := cmd.Flags().GetStringSlice("allow-private")
			allow, err := allowedPrefixes(loop, private)
			if err != nil {
				t.Fatal(err)
			}
			contains := func(a string) bool {
				return slices.ContainsFunc(allow, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) })
			}
			for _, a := range tc.allowed {
				if !contains(a) {
					t.Errorf("%s refused, want it allowed (prefixes %v)", a, allow)
				}
			}
			for _, a := range tc.refused {
				if contains(a) {
					t.Errorf("%s allowed, want it refused (prefixes %v)", a, allow)
				}
			}
		})
	}
}

// A proxy written host:port means http://host:port, as for curl.
func TestProxyWithScheme(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:3128":          "http://127.0.0.1:3128",
		"proxy.lan:8080":          "http://proxy.lan:8080",
		"http://127.0.0.1:3128":   "http://127.0.0.1:3128",
		"socks5://127.0.0.1:1080": "socks5://127.0.0.1:1080",
		"":                        "",
	} {
		if got := proxyWithScheme(in); got != want {
			t.Errorf("proxyWithScheme(%q) = %q, want %q", in, got, want)
		}
	}
}

func (v *vhosts) fetched(u string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.urls[u]
}

// With --sitemaps, a sitemap on another site that robots.txt names is out
// of --scope, and so are the pages it lists.
func TestCLISitemapEntriesKeepScope(t *testing.T) {
	v, proxy := newVhosts(t)
	r := cli(t, "", "crawl", "http://www.shop.test/", "--proxy", proxy.URL, "--sitemaps", "-q")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, u := range []string{"http://other.test/sitemap.xml", "http://other.test/listed"} {
		if n := v.fetched(u); n != 0 {
			t.Errorf("%s fetched %d times: out of --scope host", u, n)
		}
	}
	if want, got := []string{"http://www.shop.test/", "http://www.shop.test/a"}, crawledURLs(t, r.stdout); !slices.Equal(got, want) {
		t.Errorf("crawled %q, want %q", got, want)
	}
}
