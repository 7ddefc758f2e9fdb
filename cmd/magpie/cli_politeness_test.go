package main

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// Issue 39 §4: --politeness ip makes --delay hold between any two requests
// to one address, whatever the port: three sites on 127.0.0.1, crawled
// together, never see two requests closer than --delay by their own clock
// (robots.txt fetches included). With --parallel 1 a start is counted from
// the first response byte, after the server has seen the request, so the
// bound holds at the server however loaded the machine.
func TestCLIPolitenessIP(t *testing.T) {
	const delay = 40 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	record := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	args := []string{"crawl", "--allow-loopback", "-q", "--politeness", "ip", "--delay", delay.String(), "--parallel", "1"}
	for range 3 {
		s := newPagesSite(t, 2, record)
		args = append(args, s.URL+"/")
	}
	out := filepath.Join(t.TempDir(), "pages.jsonl")
	if r := cli(t, "", append(args, "-o", out)...); r.code != 0 {
		t.Fatalf("magpie %q: exit %d; stderr:\n%s", args, r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	items := jsonLines(t, string(data))
	if len(items) != 9 {
		t.Errorf("%d items, want 3 sites × (home + 2 pages)", len(items))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 12 {
		t.Errorf("the sites saw %d requests, want 12 (9 pages, 3 robots.txt)", len(at))
	}
	slices.SortFunc(at, time.Time.Compare)
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < delay {
			t.Errorf("two requests reached 127.0.0.1 %v apart, want >= --delay %v", gap, delay)
		}
	}
}

// Issue 39 §4: --politeness takes host, domain or ip; anything else is a
// usage error (exit 2) naming the flag, before any request.
func TestCLIPolitenessBadValue(t *testing.T) {
	site := newPagesSite(t, 1, nil)
	for _, v := range []string{"subnet", ""} {
		r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--politeness", v)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.code != 2 || !strings.Contains(first, "--politeness") || !strings.Contains(first, "want host, domain or ip") {
			t.Errorf("--politeness %q: exit %d, stderr:\n%s\nwant 2 and a first line naming the flag and its values", v, r.code, r.stderr)
		}
	}
	for _, v := range []string{"host", "domain", "IP"} {
		if r := cli(t, "", "crawl", site.URL+"/", "--allow-loopback", "-q", "--politeness", v, "-o", "-"); r.code != 0 {
			t.Errorf("--politeness %s: exit %d, stderr:\n%s", v, r.code, r.stderr)
		}
	}
	if n := site.hitCount("/"); n != 3 {
		t.Errorf("/ fetched %d times, want 3 (once per good value, never for a bad one)", n)
	}
}

// noNames resolves nothing.
type noNames struct{}

func (noNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Issue 39 §4: a name --politeness ip cannot resolve is a failure of kind
// dns in --errors and -v, as a failed dial's lookup is.
func TestCLIPolitenessResolveErrorKind(t *testing.T) {
	l := limits.New(limits.PolitenessBy(limits.PolitenessIP), limits.WithResolver(noNames{}))
	_, err := l.Acquire(t.Context(), "gone.test:80")
	if err == nil {
		t.Fatal("Acquire(gone.test) error = nil, want the failed lookup")
	}
	if got := errorKind(err, false); got != kindDNS {
		t.Errorf("errorKind(%v) = %q, want %q", err, got, kindDNS)
	}
}
