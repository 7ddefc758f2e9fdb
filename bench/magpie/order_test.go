package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/bench/internal/harness"
	"github.com/magpiecrawl/magpie/limits"
	"github.com/magpiecrawl/magpie/storage"
)

// setFlag sets a flag variable for one test.
func setFlag[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// newRankSite serves "/" linking to "/p/1?rank=…" .. "/p/(n-1)?rank=…",
// page i ranked (i*7)%n, and pages that link nowhere; it records the
// paths fetched in order.
func newRankSite(t *testing.T, n int) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		order = append(order, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := 1; i < n; i++ {
				fmt.Fprintf(w, `<a href="/p/%d?rank=%d">p</a>`, i, i*7%n)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), order...)
	}
}

// TestPrioritizeFlag: with -prioritize the collector's Prioritize hook
// ranks every request it admits by its URL's rank (the seed, which has
// none, 0; a queue run's seed is not admitted but added), in the async
// collector and in a queue run; without it there is no hook.
func TestPrioritizeFlag(t *testing.T) {
	if prioritizeOption == nil {
		t.Fatal("this build has no Prioritize (built with magpie_noprio)")
	}
	for _, impl := range []string{"magpie-async", "magpie-queue"} {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/prioritize=%v", impl, on), func(t *testing.T) {
				setFlag(t, prioritize, on)
				srv, fetched := newRankSite(t, 20)
				var mu sync.Mutex
				ranked := map[string]int{}
				hook := prioritizeOption
				setFlag(t, &prioritizeOption, func(f func(*magpie.Request) int) magpie.CollectorOption {
					return hook(func(r *magpie.Request) int {
						p := f(r)
						mu.Lock()
						ranked[r.URL.RequestURI()] = p
						mu.Unlock()
						return p
					})
				})
				cfg, err := harness.NewConfig(srv.URL+"/", 2, 0, 0, "")
				if err != nil {
					t.Fatalf("NewConfig: %v", err)
				}
				var n harness.Counters
				if err := impls[impl](t.Context(), cfg, &n); err != nil {
					t.Fatalf("crawl error = %v, want nil", err)
				}
				if got := len(fetched()); got != 20 {
					t.Errorf("fetched %d pages, want 20", got)
				}
				want := 0
				switch {
				case on && impl == "magpie-queue":
					// The seed, added with q.AddURL before the run,
					// keeps its own priority (see Prioritize).
					want = 19
				case on:
					want = 20
				}
				if len(ranked) != want {
					t.Errorf("the hook ranked %d requests, want %d", len(ranked), want)
				}
				for u, p := range ranked {
					pu, _ := url.Parse(u)
					k, _ := strconv.Atoi(pu.Query().Get("rank"))
					if p != k {
						t.Errorf("request %s ranked %d, want %d", u, p, k)
					}
				}
			})
		}
	}
}

// TestOrderOptionsErrors: a flag this build's magpie has no option for, and
// a bad value, are errors before any crawl starts.
func TestOrderOptionsErrors(t *testing.T) {
	t.Run("no Prioritize", func(t *testing.T) {
		setFlag(t, prioritize, true)
		setFlag(t, &prioritizeOption, nil)
		if _, err := orderOptions(); !errors.Is(err, errNotInBuild) {
			t.Errorf("orderOptions() error = %v, want errNotInBuild", err)
		}
	})
	t.Run("no PolitenessBy", func(t *testing.T) {
		setFlag(t, politeness, "ip")
		setFlag(t, &politenessOption, nil)
		if _, err := orderOptions(); !errors.Is(err, errNotInBuild) {
			t.Errorf("orderOptions() error = %v, want errNotInBuild", err)
		}
	})
	t.Run("bad politeness", func(t *testing.T) {
		setFlag(t, politeness, "street")
		if _, err := orderOptions(); !errors.Is(err, limits.ErrBadPoliteness) {
			t.Errorf("orderOptions() error = %v, want limits.ErrBadPoliteness", err)
		}
	})
	t.Run("negative max-requests", func(t *testing.T) {
		setFlag(t, maxRequests, -1)
		if _, err := orderOptions(); err == nil {
			t.Errorf("orderOptions() error = nil, want one")
		}
	})
}

// newChainSite serves "/" and "/p/1".."/p/(n-1)", each linking to the
// next only; it counts the fetches of each path.
func newChainSite(t *testing.T, n int) (*httptest.Server, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		i := 0
		if r.URL.Path != "/" && !fmtScan(r.URL.Path, "/p/%d", &i) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if i+1 < n {
			fmt.Fprintf(w, `<a href="/p/%d">next</a>`, i+1)
		}
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

// TestStopAfterAndMaxRequests: -max-requests N fetches N pages, and
// -stop-after N ends the crawl, without an error, once it has N pages (a
// request already started may add one at P=1), for the async collector and
// the queue runs.
func TestStopAfterAndMaxRequests(t *testing.T) {
	for _, impl := range []string{"magpie-async", "magpie-queue", "magpie-queue-sqlite"} {
		for _, flagName := range []string{"max-requests", "stop-after"} {
			t.Run(impl+"/"+flagName, func(t *testing.T) {
				if flagName == "max-requests" {
					setFlag(t, maxRequests, 5)
				} else {
					setFlag(t, stopAfter, 5)
				}
				srv, hits := newChainSite(t, 40)
				cfg, err := harness.NewConfig(srv.URL+"/", 1, 0, 0, "")
				if err != nil {
					t.Fatalf("NewConfig: %v", err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				res, err := harness.Run(ctx, impl, impls[impl], cfg)
				if err != nil || res.TimedOut {
					t.Fatalf("crawl = %+v, %v; want no error", res, err)
				}
				fetched := 0
				for p := range hits() {
					if p != "/robots.txt" {
						fetched++
					}
				}
				hi := 5
				if flagName == "stop-after" {
					hi = 6
				}
				if res.Pages < 5 || res.Pages > int64(hi) || fetched > hi || res.Errors != 0 {
					t.Errorf("crawl = %d pages, %d errors, the site served %d pages; want 5..%d pages, no error", res.Pages, res.Errors, fetched, hi)
				}
			})
		}
	}
}

// TestPolitenessFlag: with -politeness ip the hosts on the ports of one
// address share its Delay, so that the site sees no two page starts closer
// than the Delay less the jitter of arrival; per host (no flag) two hosts
// start together.
func TestPolitenessFlag(t *testing.T) {
	const delay = 40 * time.Millisecond
	for _, pol := range []string{"ip", ""} {
		t.Run("politeness="+pol, func(t *testing.T) {
			setFlag(t, politeness, pol)
			var mu sync.Mutex
			var starts []time.Time
			var srvs [3]*httptest.Server
			for i := range srvs {
				srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/robots.txt" {
						http.NotFound(w, r)
						return
					}
					mu.Lock()
					starts = append(starts, time.Now())
					mu.Unlock()
					w.Header().Set("Content-Type", "text/html")
					if r.URL.Path == "/" {
						// Every host links to the others' pages.
						for _, s := range srvs {
							for p := range 3 {
								fmt.Fprintf(w, `<a href="%s/p/%d">p</a>`, s.URL, p)
							}
						}
					}
				}))
				defer srvs[i].Close()
			}
			cfg, err := harness.NewConfig(srvs[0].URL+"/", 8, delay, 1, srvs[1].URL+","+srvs[2].URL)
			if err != nil {
				t.Fatalf("NewConfig: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var n harness.Counters
			if err := impls["magpie-async"](ctx, cfg, &n); err != nil {
				t.Fatalf("crawl error = %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(starts) != 10 {
				t.Fatalf("the site served %d pages, want 10", len(starts))
			}
			minGap := time.Hour
			for i := 1; i < len(starts); i++ {
				minGap = min(minGap, starts[i].Sub(starts[i-1]))
			}
			if pol == "ip" && minGap < delay*3/4 {
				t.Errorf("politeness ip: smallest gap between two starts at 127.0.0.1 %v, want about %v or more", minGap, delay)
			}
			if pol == "" && minGap >= delay*3/4 {
				t.Errorf("politeness per host: smallest gap %v, want two hosts started together (< %v)", minGap, delay*3/4)
			}
		})
	}
}

// TestSampleHeld: -sample reads the entries the queue has leased and the
// requests parked, and keeps the most; a crawl with no queue reports -1
// leased; without -sample nothing is read.
func TestSampleHeld(t *testing.T) {
	q := storage.NewMemoryQueue(0)
	defer q.Close()
	if err := q.Push(t.Context(), []byte("a"), []byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Lease(t.Context(), 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector()
	for _, tt := range []struct {
		name        string
		qs          storage.Queue
		wantLeased  int64
		sampleEvery time.Duration
	}{
		{"queue", q, 3, time.Millisecond},
		{"no queue", nil, -1, time.Millisecond},
		{"off", q, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setFlag(t, sampleEvery, tt.sampleEvery)
			read := make(chan struct{}, 1)
			setFlag(t, &afterSample, func() {
				select {
				case read <- struct{}{}:
				default:
				}
			})
			var n harness.Counters
			stop := sampleHeld(t.Context(), &n, c, tt.qs)
			if tt.sampleEvery > 0 {
				<-read
			}
			stop()
			if tt.sampleEvery == 0 {
				if n.Held != nil {
					t.Errorf("Held = %+v without -sample, want nil", n.Held)
				}
				return
			}
			if n.Held == nil || n.Held.MaxLeased != tt.wantLeased || n.Held.MaxParked != 0 || n.Held.Samples < 1 {
				t.Errorf("Held = %+v, want %d leased, 0 parked, at least one sample", n.Held, tt.wantLeased)
			}
		})
	}
}

// TestStopAfterCutShortNotErrors: the fetches in flight when -stop-after
// ends the crawl are cut short; they did not fail, and are not counted as
// errors.
func TestStopAfterCutShortNotErrors(t *testing.T) {
	for _, impl := range []string{"magpie-async", "magpie-queue"} {
		t.Run(impl, func(t *testing.T) {
			setFlag(t, stopAfter, 6)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var i int
				switch {
				case r.URL.Path == "/":
					w.Header().Set("Content-Type", "text/html")
					for i := range 5 {
						fmt.Fprintf(w, `<a href="/fast/%d">f</a>`, i)
					}
					for i := range 10 {
						fmt.Fprintf(w, `<a href="/slow/%d">s</a>`, i)
					}
				case fmtScan(r.URL.Path, "/fast/%d", &i):
					w.Header().Set("Content-Type", "text/html")
				case fmtScan(r.URL.Path, "/slow/%d", &i):
					// Answers only once the crawler gives up on it.
					<-r.Context().Done()
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			cfg, err := harness.NewConfig(srv.URL+"/", 8, 0, 0, "")
			if err != nil {
				t.Fatalf("NewConfig: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			res, err := harness.Run(ctx, impl, impls[impl], cfg)
			if err != nil || res.TimedOut {
				t.Fatalf("crawl = %+v, %v; want no error", res, err)
			}
			if res.Pages != 6 || res.Errors != 0 {
				t.Errorf("crawl = %d pages, %d errors; want 6 pages (the seed and the fast ones) and no error for the slow ones cut short", res.Pages, res.Errors)
			}
		})
	}
}
