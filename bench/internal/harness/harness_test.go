package harness

import (
	"context"
	"encoding/json"
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
				cfg := Config{P: 4, Delay: tt.delay, HostPar: tt.hostPar, Polite: true, Allowed: []string{"127.0.0.1"}}
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
				for range cfg.P {
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
		cfg, err := NewConfig(tt.url, tt.p, 0, 0, tt.hosts)
		if (err != nil) != tt.wantErr {
			t.Errorf("NewConfig(%q, %d, %q) error = %v, want error %v", tt.url, tt.p, tt.hosts, err, tt.wantErr)
			continue
		}
		if err == nil && (len(cfg.Hosts) != tt.wantHosts || strings.Join(cfg.Allowed, ",") != tt.wantAllowed) {
			t.Errorf("NewConfig(%q, %d, %q) = hosts %v allowed %v, want %d hosts, allowed %s",
				tt.url, tt.p, tt.hosts, cfg.Hosts, cfg.Allowed, tt.wantHosts, tt.wantAllowed)
		}
	}
}

// allocSink keeps TestRunAllocsPerPage's allocations on the heap.
var allocSink []*[64]byte

func TestRunAllocsPerPage(t *testing.T) {
	const pages, perPage = 50, 1000
	fn := func(ctx context.Context, cfg Config, n *Counters) error {
		for range pages {
			for range perPage {
				allocSink = append(allocSink[:0], new([64]byte))
			}
			n.Pages.Add(1)
		}
		return nil
	}
	cfg, err := NewConfig("http://127.0.0.1:1/", 1, 0, 0, "")
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	res, err := Run(t.Context(), "fake", fn, cfg)
	if err != nil {
		t.Fatalf("Run error = %v, want nil", err)
	}
	if res.Pages != pages || res.Impl != "fake" {
		t.Errorf("Run = %+v, want %d pages of impl fake", res, pages)
	}
	// One allocation per new; the slice grows only once. Other goroutines
	// of the test binary may add a few.
	if res.AllocsPerPage < perPage || res.AllocsPerPage > perPage*1.1 {
		t.Errorf("AllocsPerPage = %.1f, want about %d", res.AllocsPerPage, perPage)
	}

	res, err = Run(t.Context(), "none", func(context.Context, Config, *Counters) error { return nil }, cfg)
	if err != nil || res.AllocsPerPage != 0 {
		t.Errorf("Run of no pages = %+v, %v, want AllocsPerPage 0 and no error", res, err)
	}
}

// TestRawHonoursRobots: with Robots set, the raw crawler fetches robots.txt
// once per host and skips what its "User-agent: *" group disallows; without
// it, it fetches everything.
func TestRawHonoursRobots(t *testing.T) {
	for _, robots := range []bool{false, true} {
		var mu sync.Mutex
		hits := map[string]int{}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[r.URL.Path]++
			mu.Unlock()
			switch r.URL.Path {
			case "/robots.txt":
				fmt.Fprint(w, "User-agent: other\nDisallow: /\n\nUser-agent: x\nUser-agent: *\nDisallow: /private/ # comment\nAllow: /private/ok\n")
			case "/":
				fmt.Fprint(w, `<a href="/a">a</a><a href="/private/1">p</a><a href="/private/2">p</a>`)
			default:
				fmt.Fprint(w, "leaf")
			}
		}))
		cfg, err := NewConfig(ts.URL+"/", 2, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Robots = robots
		var n Counters
		if err := Raw(t.Context(), cfg, &n); err != nil {
			t.Fatalf("Raw() error = %v", err)
		}
		ts.Close()
		wantPages, wantRobots, wantPrivate := 4, 0, 1
		if robots {
			wantPages, wantRobots, wantPrivate = 2, 1, 0
		}
		if n.Pages.Load() != int64(wantPages) || hits["/robots.txt"] != wantRobots || hits["/private/1"] != wantPrivate {
			t.Errorf("Robots=%v: %d pages, robots.txt fetched %d times, /private/1 %d; want %d, %d, %d",
				robots, n.Pages.Load(), hits["/robots.txt"], hits["/private/1"], wantPages, wantRobots, wantPrivate)
		}
	}
}

// TestRunHeld: the Held figures a crawl sets reach the result line, and a
// crawl that sets none has none ("held" left out of the JSON).
func TestRunHeld(t *testing.T) {
	cfg, err := NewConfig("http://127.0.0.1:1/", 1, 0, 0, "")
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	want := Held{MaxLeased: 7, MaxParked: 3, Samples: 2}
	res, err := Run(t.Context(), "held", func(_ context.Context, _ Config, n *Counters) error {
		h := want
		n.Held = &h
		return nil
	}, cfg)
	if err != nil || res.Held == nil || *res.Held != want {
		t.Fatalf("Run = %+v, %v; want Held %+v", res, err, want)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"held":{"max_leased":7,"max_parked":3,"samples":2}`) {
		t.Errorf("result line %s: want its held figures", b)
	}
	res, _ = Run(t.Context(), "none", func(context.Context, Config, *Counters) error { return nil }, cfg)
	if b, _ := json.Marshal(res); strings.Contains(string(b), "held") {
		t.Errorf("result line of an unsampled crawl %s: want no held figures", b)
	}
}
