package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var hrefRE = regexp.MustCompile(`<a href="([^"]*)"`)

func hrefs(page []byte) []string {
	var out []string
	for _, m := range hrefRE.FindAllSubmatch(page, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

func testBases(n int) []string {
	b := make([]string, n)
	for i := range b {
		b[i] = "http://127.0.0.1:" + string(rune('1'+i)) + "000"
	}
	return b
}

func TestPagesReachableAndDeterministic(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
	}{
		{"one host", config{pages: 60, sizeKB: 4, links: 10, seed: 7, hosts: 1}},
		{"three hosts", config{pages: 40, sizeKB: 2, links: 6, seed: 3, hosts: 3}},
		{"robots", config{pages: 30, sizeKB: 1, links: 10, seed: 9, hosts: 2, robots: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bases := testBases(tt.cfg.hosts)
			g, g2 := newGenerator(tt.cfg, bases), newGenerator(tt.cfg, bases)
			hostOf := map[string]int{}
			for i, b := range bases {
				hostOf[strings.TrimPrefix(b, "http://")] = i
			}
			type page struct{ h, i int }
			seen := map[page]bool{{0, 0}: true}
			todo := []page{{0, 0}}
			for len(todo) > 0 {
				p := todo[0]
				todo = todo[1:]
				body := g.page(p.h, p.i)
				if !bytes.Equal(body, g2.page(p.h, p.i)) {
					t.Fatalf("page(%d, %d) differs between two generators with the same seed", p.h, p.i)
				}
				if len(body) < tt.cfg.sizeKB*1024 {
					t.Errorf("page(%d, %d) is %d bytes, want at least %d", p.h, p.i, len(body), tt.cfg.sizeKB*1024)
				}
				links := hrefs(body)
				if len(links) != tt.cfg.links {
					t.Errorf("page(%d, %d) has %d links, want %d", p.h, p.i, len(links), tt.cfg.links)
				}
				external := 0
				for _, l := range links {
					base, _ := url.Parse(bases[p.h] + pagePath(p.i))
					u, err := base.Parse(l)
					if err != nil {
						t.Fatalf("page(%d, %d) link %q: %v", p.h, p.i, l, err)
					}
					if u.Host == "external.invalid" {
						external++
						continue
					}
					h, ok := hostOf[u.Host]
					if !ok {
						t.Fatalf("page(%d, %d) links unknown host %q", p.h, p.i, u.Host)
					}
					n, kind := g.pageNumber(u.Path)
					switch kind {
					case kindNone:
						t.Fatalf("page(%d, %d) links %q, which the site does not serve", p.h, p.i, l)
					case kindPrivate:
						continue
					}
					if q := (page{h, n}); !seen[q] {
						seen[q] = true
						todo = append(todo, q)
					}
				}
				if external != 1 {
					t.Errorf("page(%d, %d) has %d external links, want 1", p.h, p.i, external)
				}
			}
			if want := tt.cfg.pages * tt.cfg.hosts; len(seen) != want {
				t.Errorf("reachable pages = %d, want %d", len(seen), want)
			}
		})
	}
}

func TestPageNumber(t *testing.T) {
	g := newGenerator(config{pages: 10, links: 3, hosts: 1, robots: true}, testBases(1))
	tests := []struct {
		path string
		n    int
		kind pageKind
	}{
		{"/", 0, kindPage}, {"/p/9", 9, kindPage}, {"/p/10", 0, kindNone}, {"/p/0", 0, kindNone},
		{"/p/01", 0, kindNone}, {"/p/x", 0, kindNone}, {"/private/3", 3, kindPrivate}, {"/other", 0, kindNone},
	}
	for _, tt := range tests {
		n, kind := g.pageNumber(tt.path)
		if n != tt.n || kind != tt.kind {
			t.Errorf("pageNumber(%q) = %d, %v, want %d, %v", tt.path, n, kind, tt.n, tt.kind)
		}
	}
}

func TestStatsCountDuplicatesNotControl(t *testing.T) {
	cfg := config{pages: 5, sizeKB: 1, links: 4, seed: 1, hosts: 1}
	srv := httptest.NewUnstartedServer(nil)
	bases := []string{"http://" + srv.Listener.Addr().String()}
	st := newStats(bases)
	srv.Config.Handler = handler(cfg, newGenerator(cfg, bases), st, 0)
	srv.Config.ConnContext = connContext
	srv.Start()
	t.Cleanup(srv.Close)

	get := func(path string) []byte {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	get("/_reset")
	for _, p := range []string{"/", "/p/1", "/p/1", "/robots.txt", "/robots.txt", "/nope"} {
		get(p)
	}
	var r Report
	if err := json.Unmarshal(get("/_stats"), &r); err != nil {
		t.Fatalf("/_stats: %v", err)
	}
	got := r.Total
	if got.Requests != 6 || got.Duplicates != 1 || got.Robots != 2 || got.PageStarts != 4 || got.NewConns != 1 {
		t.Errorf("stats = %+v, want 6 requests, 1 duplicate, 2 robots, 4 page starts, 1 new conn", got)
	}
	if got.MinGapMS < 0 || got.P05GapMS < got.MinGapMS || got.MedianGapMS < got.P05GapMS {
		t.Errorf("gaps min %v, p5 %v, median %v: want 0 <= min <= p5 <= median after 4 page starts",
			got.MinGapMS, got.P05GapMS, got.MedianGapMS)
	}
	resp, err := srv.Client().Get(srv.URL + "/p/99")
	if err != nil {
		t.Fatalf("GET /p/99: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /p/99 status = %d, want %d", resp.StatusCode, http.StatusNotFound)
	}
}

// TestLoopbackAddrs: -loopback gives each host its own loopback address,
// never one ending in 0 or 255.
func TestLoopbackAddrs(t *testing.T) {
	seen := map[string]int{}
	for h := range 70000 {
		a := loopbackAddr(h)
		ip, err := netip.ParseAddr(a)
		if err != nil || !ip.IsLoopback() {
			t.Fatalf("loopbackAddr(%d) = %q, not a loopback address", h, a)
		}
		if b := ip.As4(); b[2] == 0 || b[3] == 0 || b[2] == 255 || b[3] == 255 {
			t.Fatalf("loopbackAddr(%d) = %q", h, a)
		}
		if o, dup := seen[a]; dup {
			t.Fatalf("loopbackAddr(%d) = loopbackAddr(%d) = %q", h, o, a)
		}
		seen[a] = h
	}
}

// TestLoopbackIndex: -one-listener finds each host from the address a
// connection was made to, the inverse of loopbackAddr, and no host from an
// address loopbackAddr never gives.
func TestLoopbackIndex(t *testing.T) {
	for _, h := range []int{0, 1, 253, 254, 255, 64515, 64516, 64517, 254*254*126 - 1} {
		a := netip.MustParseAddr(loopbackAddr(h))
		if got, ok := loopbackIndex(a); !ok || got != h {
			t.Errorf("loopbackIndex(%s) = %d, %v; want %d, true", a, got, ok, h)
		}
	}
	for _, s := range []string{"127.0.0.1", "127.1.0.1", "127.1.1.255", "127.127.1.1", "10.1.1.1", "::1"} {
		if h, ok := loopbackIndex(netip.MustParseAddr(s)); ok {
			t.Errorf("loopbackIndex(%s) = %d, true; want false", s, h)
		}
	}
}
