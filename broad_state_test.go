package magpie

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// The state a crawl keeps per host, measured: what a broad crawl of
// thousands of hosts pays for each beyond its pages. A crawl with a Delay
// per host keeps, for each host it has seen, a scheduling entry in the
// limiter's Gate (limits, measured there), a robots.txt cache entry (here)
// and, while the host is in rotation, an idle connection (net/http's).

// siteRobots is the robots.txt of bench/cmd/site -robots, the file a broad
// crawl's hosts typically serve: a line or two.
const siteRobots = "User-agent: *\nDisallow: /private/\n"

// robotsHostBytes returns the heap the robots cache holds per host once n
// hosts' robots.txt (body) are cached, and the fetches made.
func robotsHostBytes(t *testing.T, n int, body string) (perHost float64, fetches int32) {
	t.Helper()
	fetch, calls := staticRobots(200, body)
	urls := make([]*url.URL, n)
	for i := range urls {
		urls[i] = mustURL(t, "http://127."+strconv.Itoa(1+i/65536)+"."+strconv.Itoa(i/256%256)+"."+strconv.Itoa(i%256)+":8080/p/1")
	}
	var rc *robotsCache
	grown := heapGrowth(func() any {
		rc = newRobotsCache(time.Hour, fetch)
		for _, u := range urls {
			if ok, _, err := rc.check(context.Background(), u, "magpie"); !ok || err != nil {
				t.Fatalf("check(%s) = %v, %v; want allowed", u, ok, err)
			}
		}
		return rc
	})
	return float64(grown) / float64(n), calls.Load()
}

// TestRobotsCachePerHost: a small robots.txt costs the cache a bounded,
// stated number of bytes per host, the same at 2,000 and 20,000 hosts
// (linear in hosts), and every one of 20,000 hosts stays cached: a cache
// that held fewer hosts than a crawl keeps in rotation would fetch
// robots.txt again before nearly every page, each fetch in the host's
// turn.
func TestRobotsCachePerHost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 20,000 hosts")
	}
	// 3 KiB: what one entry of a two-line file takes (the parsed rules, the
	// entry, its list element and map slot), with room for the race
	// detector's larger objects.
	const bound = 3 << 10
	var per [2]float64
	for i, n := range []int{2000, 20000} {
		b, fetches := robotsHostBytes(t, n, siteRobots)
		t.Logf("robots cache, %d hosts: %.0f bytes per host", n, b)
		if b > bound {
			t.Errorf("robots cache at %d hosts: %.0f bytes per host, want at most %d", n, b, bound)
		}
		if int(fetches) != n {
			t.Errorf("robots cache at %d hosts: %d fetches, want %d", n, fetches, n)
		}
		per[i] = b
		if charged := float64(robotsEntryCost + robotsCost([]byte(siteRobots))); charged < b*0.95 {
			t.Errorf("robots cache charges %.0f bytes per host against its budget, holds %.0f: the byte bound does not hold", charged, b)
		}
	}
	if per[1] > 1.25*per[0] {
		t.Errorf("robots cache bytes per host grow with hosts: %.0f at 2,000, %.0f at 20,000", per[0], per[1])
	}
	// Every host of the 20,000 is still cached: checking each again
	// fetches nothing.
	fetch, calls := staticRobots(200, siteRobots)
	rc := newRobotsCache(time.Hour, fetch)
	check := func(i int) {
		u := mustURL(t, fmt.Sprintf("http://h%d.example:80/x", i))
		if _, _, err := rc.check(t.Context(), u, "magpie"); err != nil {
			t.Fatalf("check(%s) error = %v", u, err)
		}
	}
	for round := range 2 {
		for i := range 20000 {
			check(i)
		}
		if got := calls.Load(); got != 20000 {
			t.Fatalf("after round %d over 20,000 hosts: %d robots.txt fetches, want 20000 (one per host)", round+1, got)
		}
	}
}
