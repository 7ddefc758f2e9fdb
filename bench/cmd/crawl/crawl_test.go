package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// newTestSite serves pages "/" and "/p/1".."/p/(n-1)"; each links to the next,
// to "/" (a duplicate), absolutely to itself, and to an external host.
func newTestSite(t *testing.T, n int) (*httptest.Server, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		i := 0
		if r.URL.Path != "/" {
			if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &i); err != nil || i <= 0 || i >= n {
				http.NotFound(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><a href="/">home</a><a href="http://%s%s">self</a>`, r.Host, r.URL.Path)
		if i+1 < n {
			fmt.Fprintf(w, `<p><a class="x" href="../p/%d">next</a></p>`, i+1)
		}
		fmt.Fprint(w, `<a href="http://external.invalid/">out</a><a href="/p/missing">broken</a></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(hits))
		for k, v := range hits {
			out[k] = v
		}
		return out
	}
}

func TestCrawlEveryPageOnce(t *testing.T) {
	const pages = 40
	for _, impl := range implNames() {
		for _, p := range []int{1, 8} {
			t.Run(fmt.Sprintf("%s/p=%d", impl, p), func(t *testing.T) {
				srv, hits := newTestSite(t, pages)
				cfg, err := newConfig(srv.URL+"/", p, 0, 0, "")
				if err != nil {
					t.Fatalf("newConfig: %v", err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				var n counters
				if err := impls[impl](ctx, cfg, &n); err != nil {
					t.Fatalf("%s crawl error = %v, want nil", impl, err)
				}
				if got := n.pages.Load(); got != pages {
					t.Errorf("%s pages = %d, want %d", impl, got, pages)
				}
				if got := n.errors.Load(); got != 1 {
					t.Errorf("%s errors = %d, want 1 (/p/missing)", impl, got)
				}
				for path, c := range hits() {
					if c != 1 && !strings.HasPrefix(impl, "colly") {
						// Colly's visited check is not atomic; duplicates
						// are what the benchmark measures, not a test failure.
						t.Errorf("%s fetched %s %d times, want 1", impl, path, c)
					}
				}
			})
		}
	}
}

func TestFrontierPoliteness(t *testing.T) {
	tests := []struct {
		name    string
		hostPar int
		delay   time.Duration
		hosts   int
		// wantGap is the least time between two starts on one host.
		wantGap time.Duration
	}{
		{"one host delay", 2, 100 * time.Millisecond, 1, 100 * time.Millisecond},
		{"three hosts delay", 1, 50 * time.Millisecond, 3, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := config{p: 4, delay: tt.delay, hostPar: tt.hostPar, polite: true, allowed: []string{"127.0.0.1"}}
				f := newFrontier(cfg)
				for h := range tt.hosts {
					for i := range 5 {
						u, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d/p/%d", 1000+h, i))
						f.push(u)
					}
				}
				var mu sync.Mutex
				starts := map[string][]time.Time{}
				var wg sync.WaitGroup
				for range cfg.p {
					wg.Go(func() {
						for {
							hq, _, ok := f.next(t.Context())
							if !ok {
								return
							}
							mu.Lock()
							starts[hq.name] = append(starts[hq.name], time.Now())
							mu.Unlock()
							time.Sleep(10 * time.Millisecond) // the fetch, in virtual time
							f.done(hq)
						}
					})
				}
				wg.Wait()
				if len(starts) != tt.hosts {
					t.Fatalf("hosts fetched = %d, want %d", len(starts), tt.hosts)
				}
				for host, ts := range starts {
					if len(ts) != 5 {
						t.Errorf("host %s: %d starts, want 5", host, len(ts))
					}
					for i := 1; i < len(ts); i++ {
						if gap := ts[i].Sub(ts[i-1]); gap < tt.wantGap {
							t.Errorf("host %s: gap between starts %d and %d = %v, want >= %v", host, i-1, i, gap, tt.wantGap)
						}
					}
					// Hosts are crawled side by side, so the crawl takes
					// 4 gaps, not 4 gaps per host.
					if total := ts[len(ts)-1].Sub(ts[0]); total != 4*tt.wantGap {
						t.Errorf("host %s: first to last start = %v, want %v", host, total, 4*tt.wantGap)
					}
				}
			})
		})
	}
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		url, hosts  string
		p           int
		wantErr     bool
		wantHosts   int
		wantAllowed string
	}{
		{"http://127.0.0.1:1/", "", 4, false, 1, "127.0.0.1"},
		{"http://127.0.0.1:1/", "http://127.0.0.1:1,127.0.0.1:2 http://127.0.0.1:3", 4, false, 3, "127.0.0.1"},
		{"", "", 4, true, 0, ""},
		{"/relative", "", 4, true, 0, ""},
		{"http://127.0.0.1:1/", "", 0, true, 0, ""},
	}
	for _, tt := range tests {
		cfg, err := newConfig(tt.url, tt.p, 0, 0, tt.hosts)
		if (err != nil) != tt.wantErr {
			t.Errorf("newConfig(%q, %d, %q) error = %v, want error %v", tt.url, tt.p, tt.hosts, err, tt.wantErr)
			continue
		}
		if err == nil && (len(cfg.hosts) != tt.wantHosts || strings.Join(cfg.allowed, ",") != tt.wantAllowed) {
			t.Errorf("newConfig(%q, %d, %q) = hosts %v allowed %v, want %d hosts, allowed %s",
				tt.url, tt.p, tt.hosts, cfg.hosts, cfg.allowed, tt.wantHosts, tt.wantAllowed)
		}
	}
}
