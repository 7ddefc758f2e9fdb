package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const testRobots = `User-agent: *
Disallow: /private
Allow: /private/open
Disallow: /search?q=
Crawl-delay: 2

User-agent: magpie
Disallow: /magpie-only
Crawl-delay: 5

User-agent: badbot
Disallow: /
`

// staticRobots returns a fetch that always answers status and body, and a
// counter of its calls.
func staticRobots(status int, body string) (robotsFetch, *atomic.Int32) {
	var calls atomic.Int32
	return func(ctx context.Context, u *url.URL) (int, []byte, error) {
		calls.Add(1)
		return status, []byte(body), nil
	}, &calls
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("url.Parse(%q) error = %v", s, err)
	}
	return u
}

func TestRobotsRules(t *testing.T) {
	fetch, calls := staticRobots(200, testRobots)
	rc := newRobotsCache(0, fetch)
	tests := []struct {
		url, ua     string
		wantAllowed bool
		wantDelay   time.Duration
	}{
		{"http://h/", "somebot/1.0", true, 2 * time.Second},
		{"http://h", "somebot/1.0", true, 2 * time.Second},
		{"http://h/private/x", "somebot/1.0", false, 2 * time.Second},
		{"http://h/private/open/x", "somebot/1.0", true, 2 * time.Second},
		{"http://h/search?q=go", "somebot/1.0", false, 2 * time.Second},
		{"http://h/search?page=2", "somebot/1.0", true, 2 * time.Second},
		{"http://h/private/x", "magpie/1.0", true, 5 * time.Second},
		{"http://h/magpie-only", "Magpie/1.0", false, 5 * time.Second},
		{"http://h/magpie-only", "somebot/1.0", true, 2 * time.Second},
		{"http://h/anything", "BadBot", false, 0},
		{"HTTP://H:80/private", "somebot/1.0", false, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.ua+" "+tt.url, func(t *testing.T) {
			allowed, delay, err := rc.check(t.Context(), mustURL(t, tt.url), tt.ua)
			if err != nil || allowed != tt.wantAllowed || delay != tt.wantDelay {
				t.Errorf("check(%q, %q) = %v, %v, %v; want %v, %v, nil", tt.url, tt.ua, allowed, delay, err, tt.wantAllowed, tt.wantDelay)
			}
		})
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("fetch called %d times for one host, want 1", n)
	}
}

func TestRobotsStatusMapping(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   bool
	}{
		{200, "User-agent: *\nDisallow: /", false},
		{200, "", true},
		{200, "\x00\xff garbage \n\n:::", true},
		{204, "", true},
		{301, "User-agent: *\nDisallow: /", true},
		{401, "User-agent: *\nDisallow: /", true},
		{403, "", true},
		{404, "User-agent: *\nDisallow: /", true},
		{600, "", true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			fetch, _ := staticRobots(tt.status, tt.body)
			rc := newRobotsCache(time.Hour, fetch)
			allowed, _, err := rc.check(t.Context(), mustURL(t, "https://h/page"), "magpie")
			if err != nil || allowed != tt.want {
				t.Errorf("check() with robots.txt status %d = %v, %v; want %v, nil", tt.status, allowed, err, tt.want)
			}
		})
	}
}

func TestRobotsKeyPerOrigin(t *testing.T) {
	var mu sync.Mutex
	var fetched []string
	rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
		mu.Lock()
		fetched = append(fetched, u.String())
		mu.Unlock()
		return 404, nil, nil
	})
	for _, s := range []string{
		"http://h/a", "http://H:80/b", "https://h/c", "https://h:443/d", "http://h:8080/e", "http://other/f", "http://[::1]/g", "http://[::1]:80/h",
	} {
		if _, _, err := rc.check(t.Context(), mustURL(t, s), "magpie"); err != nil {
			t.Fatalf("check(%q) error = %v", s, err)
		}
	}
	want := []string{"http://h/robots.txt", "https://h/robots.txt", "http://h:8080/robots.txt", "http://other/robots.txt", "http://[::1]/robots.txt"}
	if len(fetched) != len(want) {
		t.Fatalf("fetched %q, want %q", fetched, want)
	}
	for i := range want {
		if fetched[i] != want[i] {
			t.Errorf("fetch %d = %q, want %q", i, fetched[i], want[i])
		}
	}
}

func TestRobotsSingleFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int32
		rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
			calls.Add(1)
			<-release
			return 200, []byte("User-agent: *\nDisallow: /no"), nil
		})
		var wg sync.WaitGroup
		results := make([]bool, 20)
		for i := range 20 {
			wg.Go(func() {
				path := "/yes"
				if i%2 == 0 {
					path = "/no"
				}
				allowed, _, err := rc.check(t.Context(), mustURL(t, "http://h"+path), "magpie")
				if err != nil {
					t.Errorf("check() error = %v", err)
				}
				results[i] = allowed
			})
		}
		synctest.Wait() // all 20 are blocked: one in fetch, 19 waiting on it
		close(release)
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("fetch called %d times under 20 concurrent first checks, want 1", n)
		}
		for i, allowed := range results {
			if want := i%2 != 0; allowed != want {
				t.Errorf("check %d allowed = %v, want %v", i, allowed, want)
			}
		}
	})
}

func TestRobotsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fetch, calls := staticRobots(200, "User-agent: *\nDisallow: /x")
		rc := newRobotsCache(10*time.Minute, fetch)
		u := mustURL(t, "http://h/x")
		checkN := func(wantCalls int32) {
			t.Helper()
			if allowed, _, err := rc.check(t.Context(), u, "magpie"); err != nil || allowed {
				t.Fatalf("check() = %v, %v; want false, nil", allowed, err)
			}
			if n := calls.Load(); n != wantCalls {
				t.Fatalf("fetch called %d times, want %d", n, wantCalls)
			}
		}
		checkN(1)
		time.Sleep(9 * time.Minute)
		checkN(1)
		time.Sleep(2 * time.Minute)
		checkN(2)
		time.Sleep(5 * time.Minute)
		checkN(2)
	})
}

func TestRobotsDefaultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fetch, calls := staticRobots(404, "")
		rc := newRobotsCache(0, fetch)
		u := mustURL(t, "http://h/")
		rc.check(t.Context(), u, "magpie")
		time.Sleep(defaultRobotsTTL - time.Second)
		rc.check(t.Context(), u, "magpie")
		if n := calls.Load(); n != 1 {
			t.Errorf("fetch called %d times within the default TTL, want 1", n)
		}
		time.Sleep(2 * time.Second)
		rc.check(t.Context(), u, "magpie")
		if n := calls.Load(); n != 2 {
			t.Errorf("fetch called %d times after the default TTL, want 2", n)
		}
	})
}

// TestRobotsUnreachable follows RFC 9309 §2.3.1.4: a 5xx or a fetch error
// disallows the host for now. The fetch is tried robotsAttempts times with a
// doubling backoff, check saying until when to wait; then the host's URLs
// are refused with ErrRobotsTxtUnavailable for robotsErrorTTL, after which
// a fresh round of attempts starts. A robots.txt that comes back ends it.
func TestRobotsUnreachable(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fetch func() (int, []byte, error)
		cause error
	}{
		{"503", func() (int, []byte, error) { return 503, nil, nil }, nil},
		{"network error", func() (int, []byte, error) { return 0, nil, errDownForTest }, errDownForTest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				var up atomic.Bool
				rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
					calls.Add(1)
					if up.Load() {
						return 200, []byte("User-agent: *\nDisallow: /x"), nil
					}
					return tt.fetch()
				})
				u := mustURL(t, "http://h/")
				start := time.Now()
				for attempt, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
					for range 3 { // checks while waiting share the attempt
						_, _, err := rc.check(t.Context(), u, "magpie")
						pe, ok := errors.AsType[*robotsPendingError](err)
						if !ok {
							t.Fatalf("attempt %d: check() error = %v, want *robotsPendingError", attempt+1, err)
						}
						if tt.cause != nil && !errors.Is(err, tt.cause) {
							t.Errorf("pending error %v does not wrap %v", err, tt.cause)
						}
						if got := time.Until(pe.Until); got != wait {
							t.Errorf("attempt %d: wait %v, want %v", attempt+1, got, wait)
						}
					}
					if n := calls.Load(); n != int32(attempt+1) {
						t.Fatalf("fetches = %d after attempt %d", n, attempt+1)
					}
					time.Sleep(wait)
				}
				for range 3 {
					if _, _, err := rc.check(t.Context(), u, "magpie"); !errors.Is(err, ErrRobotsTxtUnavailable) {
						t.Fatalf("check() after %d attempts error = %v, want ErrRobotsTxtUnavailable", robotsAttempts, err)
					}
				}
				if n := calls.Load(); n != robotsAttempts {
					t.Errorf("fetches = %d, want %d", n, robotsAttempts)
				}
				if el := time.Since(start); el != 7*time.Second {
					t.Errorf("attempts spanned %v, want 7s", el)
				}
				time.Sleep(robotsErrorTTL)
				up.Store(true)
				allowed, _, err := rc.check(t.Context(), mustURL(t, "http://h/x"), "magpie")
				if err != nil || allowed {
					t.Errorf("check() once robots.txt is back = %v, %v; want false, nil", allowed, err)
				}
			})
		})
	}
}

var errDownForTest = errors.New("connection refused")

func TestRobotsFetchPanics(t *testing.T) {
	rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
		panic("boom")
	})
	if _, _, err := rc.check(t.Context(), mustURL(t, "http://h/"), "magpie"); err == nil {
		t.Errorf("check() with a panicking fetch error = nil, want an error")
	}
}

func TestRobotsCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
			<-release
			return 404, nil, nil
		})
		u := mustURL(t, "http://h/")
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, _, err := rc.check(t.Context(), u, "magpie"); err != nil {
				t.Errorf("leader check() error = %v", err)
			}
		})
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, _, err := rc.check(ctx, u, "magpie")
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("waiting check() after cancel error = %v, want %v", err, context.Canceled)
		}
		close(release)
		wg.Wait()
	})
}

func TestRobotsLeaderCancelledWaitersRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done() // the first fetch only ends when its check is cancelled
				return 0, nil, ctx.Err()
			}
			return 200, []byte("User-agent: *\nDisallow: /"), nil
		})
		u := mustURL(t, "http://h/x")
		leaderCtx, cancel := context.WithCancel(t.Context())
		leaderErr := make(chan error, 1)
		go func() {
			_, _, err := rc.check(leaderCtx, u, "magpie")
			leaderErr <- err
		}()
		synctest.Wait()
		waiterRes := make(chan error, 1)
		go func() {
			allowed, _, err := rc.check(t.Context(), u, "magpie")
			if err == nil && allowed {
				err = errors.New("allowed, want disallowed")
			}
			waiterRes <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-leaderErr; !errors.Is(err, context.Canceled) {
			t.Errorf("leader check() error = %v, want %v", err, context.Canceled)
		}
		if err := <-waiterRes; err != nil {
			t.Errorf("waiter check() after leader cancelled = %v, want a fresh fetch and nil", err)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("fetch called %d times, want 2", n)
		}
	})
}

func TestRobotsBounded(t *testing.T) {
	fetch, calls := staticRobots(404, "")
	rc := newRobotsCache(time.Hour, fetch)
	for i := range maxRobotsHosts + 50 {
		rc.check(t.Context(), mustURL(t, "http://h"+strconv.Itoa(i)+"/"), "magpie")
		if i == 0 {
			continue
		}
		// Keep host 0 recently used so that it survives eviction.
		rc.check(t.Context(), mustURL(t, "http://h0/"), "magpie")
	}
	rc.mu.Lock()
	n := len(rc.entries)
	rc.mu.Unlock()
	if n != maxRobotsHosts {
		t.Errorf("cache holds %d hosts, want %d", n, maxRobotsHosts)
	}
	before := calls.Load()
	rc.check(t.Context(), mustURL(t, "http://h0/"), "magpie")
	if calls.Load() != before {
		t.Errorf("recently used host was evicted")
	}
	rc.check(t.Context(), mustURL(t, "http://h1/"), "magpie")
	if calls.Load() != before+1 {
		t.Errorf("least recently used host was not evicted")
	}
}

func FuzzRobots(f *testing.F) {
	f.Add(200, testRobots, "/private/x?y=1", "magpie")
	f.Add(200, "User-agent: *\nDisallow: /*.php$\nAllow: /$", "/index.php", "*")
	f.Add(200, "Sitemap: http://x/s.xml\nCrawl-delay: abc\nUser-agent:\nDisallow:", "/", "")
	f.Add(500, "", "/", "a")
	f.Add(404, "\xff\xfe", "/%zz", "b")
	f.Fuzz(func(t *testing.T, status int, body, path, ua string) {
		rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
			return status, []byte(body), nil
		})
		u := &url.URL{Scheme: "http", Host: "h", Path: path}
		_, _, err := rc.check(t.Context(), u, ua)
		if status >= 500 && status <= 599 {
			// Unreachable (RFC 9309 §2.3.1.4): wait and fetch again.
			if _, ok := errors.AsType[*robotsPendingError](err); !ok {
				t.Fatalf("check() with status %d error = %v, want *robotsPendingError", status, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("check() error = %v, want nil (parse problems allow all)", err)
		}
	})
}

// TestRobotsCacheBoundedByBytes: robots.txt files of ~20,000 wildcard rules
// cost ~26 MiB each once parsed; the cache keeps them within its byte
// budget, not only its host count, and the heap shows it.
func TestRobotsCacheBoundedByBytes(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	for i := 0; b.Len() < 490<<10; i++ {
		fmt.Fprintf(&b, "Disallow: /a*b%d*c$\n", i)
	}
	body := []byte(b.String())
	rc := newRobotsCache(time.Hour, func(ctx context.Context, u *url.URL) (int, []byte, error) {
		return 200, body, nil
	})
	rc.maxBytes = 32 << 20
	if cost := robotsCost(body); cost < 16<<20 || cost > rc.maxBytes {
		t.Fatalf("robotsCost = %d MiB for 20,000 wildcard rules, want an estimate near 26 MiB", cost>>20)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const hosts = 4
	for i := range hosts {
		u := mustURL(t, fmt.Sprintf("http://h%d/a", i))
		if _, _, err := rc.check(t.Context(), u, "magpie"); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	rc.mu.Lock()
	kept, bytes := rc.lru.Len(), rc.bytes
	rc.mu.Unlock()
	if bytes > rc.maxBytes || kept != 1 {
		t.Errorf("cache keeps %d hosts, %d MiB; want 1 within %d MiB", kept, bytes>>20, rc.maxBytes>>20)
	}
	// Unbounded, the four parsed files would hold about 104 MiB.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 60<<20 {
		t.Errorf("heap grew by %d MiB for %d huge robots.txt files, want under 60 MiB", grown>>20, hosts)
	}
	runtime.KeepAlive(rc)
}

// TestRobotsCacheOfClones: the robots.txt cache belongs to a collector and
// its clones (the README's "Coming from Colly" row): collectors cloned from
// one, one per page, fetch robots.txt once; a new collector per page
// fetches it again for each.
func TestRobotsCacheOfClones(t *testing.T) {
	pages := []string{"/a", "/b", "/c", "/html"}
	ts := newTestServer(t)
	base := NewCollector()
	for _, p := range pages {
		if err := base.Clone().Visit(ts.URL + p); err != nil {
			t.Fatalf("clone's Visit(%s) error = %v", p, err)
		}
	}
	if n := ts.count("/robots.txt"); n != 1 {
		t.Errorf("robots.txt fetched %d times by %d clones of one collector, want 1", n, len(pages))
	}
	ts = newTestServer(t)
	for _, p := range pages {
		if err := NewCollector().Visit(ts.URL + p); err != nil {
			t.Fatalf("new collector's Visit(%s) error = %v", p, err)
		}
	}
	if n := ts.count("/robots.txt"); n != len(pages) {
		t.Errorf("robots.txt fetched %d times by %d new collectors, want %d", n, len(pages), len(pages))
	}
}
