package magpie

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/limits"
)

// arrivals records when each request reached a server, by the server's
// clock, with its Host header and path.
type arrivals struct {
	mu  sync.Mutex
	at  []time.Time
	hit []string // host + path
}

func (a *arrivals) handler(body func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.hit = append(a.hit, r.Host+r.URL.Path)
		a.mu.Unlock()
		if body != nil {
			body(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	})
}

// closest returns the two hits that arrived closest together and the time
// between them.
func (a *arrivals) closest() (gap time.Duration, first, second string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := make([]int, len(a.at))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int { return a.at[i].Compare(a.at[j]) })
	gap = time.Duration(1<<63 - 1)
	for k := 1; k < len(idx); k++ {
		if d := a.at[idx[k]].Sub(a.at[idx[k-1]]); d < gap {
			gap, first, second = d, a.hit[idx[k-1]], a.hit[idx[k]]
		}
	}
	return gap, first, second
}

func (a *arrivals) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// mapResolver resolves the names in its table and fails the others with a
// *net.DNSError; it counts the lookups.
type mapResolver struct {
	mu    sync.Mutex
	addrs map[string]netip.Addr
	calls int
}

func (m *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if a, ok := m.addrs[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (m *mapResolver) lookups() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

var loopback = netip.MustParseAddr("127.0.0.1")

// TestPolitenessByIPManyPorts: 100 servers on 127.0.0.1, one port each,
// keyed by IP share one Delay: no two requests reach that address closer
// than Delay, by the servers' clock.
func TestPolitenessByIPManyPorts(t *testing.T) {
	const (
		servers = 100
		delay   = 15 * time.Millisecond
	)
	log := &arrivals{}
	var urls []string
	for range servers {
		srv := httptest.NewServer(log.handler(nil))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL+"/")
	}
	c := NewCollector(Async(), IgnoreRobotsTxt())
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay, PolitenessBy: limits.PolitenessIP}); err != nil {
		t.Fatalf("Limit() error = %v", err)
	}
	for _, u := range urls {
		if err := c.Visit(u); err != nil {
			t.Fatalf("Visit(%q) error = %v", u, err)
		}
	}
	c.Wait()
	if n := log.len(); n != servers {
		t.Fatalf("servers saw %d requests, want %d", n, servers)
	}
	if gap, a, b := log.closest(); gap < delay {
		t.Errorf("%s and %s reached 127.0.0.1 %v apart, want >= Delay %v", a, b, gap, delay)
	}
}

// TestPolitenessByDomainNames: hosts of one registrable domain share one
// Delay, robots.txt fetches (one per host) included; a host of another
// domain keeps its own.
func TestPolitenessByDomainNames(t *testing.T) {
	const delay = 30 * time.Millisecond
	shared := &arrivals{}
	other := &arrivals{}
	page := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "example.test" || strings.HasSuffix(r.Host, ".example.test") {
			shared.handler(page).ServeHTTP(w, r)
			return
		}
		other.handler(page).ServeHTTP(w, r)
	}))
	defer srv.Close()
	// Every name is served by srv.
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	defer tr.CloseIdleConnections()

	c := NewCollector(Async(), PolitenessBy(limits.PolitenessDomain))
	c.WithTransport(tr)

	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay}); err != nil {
		t.Fatalf("Limit() error = %v", err)
	}
	var wantShared int
	for _, h := range []string{"a.example.test", "b.example.test", "www.c.example.test", "example.test"} {
		for i := range 3 {
			if err := c.Visit(fmt.Sprintf("http://%s/p%d", h, i)); err != nil {
				t.Fatalf("Visit error = %v", err)
			}
			wantShared++
		}
		wantShared++ // its robots.txt
	}
	for i := range 3 {
		if err := c.Visit(fmt.Sprintf("http://other.test/p%d", i)); err != nil {
			t.Fatalf("Visit error = %v", err)
		}
	}
	c.Wait()
	if n := shared.len(); n != wantShared {
		t.Fatalf("example.test's hosts saw %d requests (%v), want %d", n, shared.hit, wantShared)
	}
	if gap, a, b := shared.closest(); gap < delay {
		t.Errorf("%s and %s reached the server %v apart, want >= Delay %v for one registrable domain", a, b, gap, delay)
	}
	if n := other.len(); n != 4 {
		t.Errorf("other.test saw %d requests, want robots.txt and 3 pages", n)
	}
}

// TestPolitenessByIPResolvesOnce: names keyed by IP are looked up by the
// collector's Resolver, once each, and the connection goes to the address
// keyed (the system resolver knows none of these names); names on one
// address share one Delay; a name that does not resolve fails to OnError
// with its *net.DNSError, at once, and reaches no server.
func TestPolitenessByIPResolvesOnce(t *testing.T) {
	const delay = 20 * time.Millisecond
	log := &arrivals{}
	srv := httptest.NewServer(log.handler(nil))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &mapResolver{addrs: map[string]netip.Addr{}}
	var names []string
	for i := range 10 {
		n := fmt.Sprintf("h%d.shared.test", i)
		res.addrs[n] = loopback
		names = append(names, n)
	}
	c := NewCollector(Async(), IgnoreRobotsTxt(), PolitenessBy(limits.PolitenessIP), Resolver(res))
	if err := c.Limit(&LimitRule{DomainGlob: "*", Delay: delay}); err != nil {
		t.Fatalf("Limit() error = %v", err)
	}
	var mu sync.Mutex
	var failed []error
	c.OnError(func(_ *Response, err error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
	})
	for _, n := range names {
		for i := range 2 {
			if err := c.Visit(fmt.Sprintf("http://%s:%d/p%d", n, port, i)); err != nil {
				t.Fatalf("Visit error = %v", err)
			}
		}
	}
	if err := c.Visit(fmt.Sprintf("http://gone.shared.test:%d/", port)); err != nil {
		t.Fatalf("Visit error = %v", err)
	}
	c.Wait()
	if n := log.len(); n != 2*len(names) {
		t.Errorf("server saw %d requests, want %d", n, 2*len(names))
	}
	if gap, a, b := log.closest(); gap < delay {
		t.Errorf("%s and %s reached 127.0.0.1 %v apart, want >= Delay %v", a, b, gap, delay)
	}
	if n := res.lookups(); n != len(names)+1 {
		t.Errorf("%d lookups, want one per name (%d)", n, len(names)+1)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 {
		t.Fatalf("OnError heard %d errors (%v), want 1 for gone.shared.test", len(failed), failed)
	}
	de, ok := errors.AsType[*net.DNSError](failed[0])
	if !ok || !de.IsNotFound || de.Name != "gone.shared.test" || !errors.Is(failed[0], limits.ErrResolve) {
		t.Errorf("OnError error = %v, want a *net.DNSError for gone.shared.test, errors.Is limits.ErrResolve", failed[0])
	}
}

// TestPolitenessByIPManyUnresolved: requests of a name that does not
// resolve, more than the frontier lets out towards the gate at once, all
// fail to OnError, and the crawl goes on to the other hosts and ends.
func TestPolitenessByIPManyUnresolved(t *testing.T) {
	const parked = 32
	const gone = 4 * parked
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &mapResolver{addrs: map[string]netip.Addr{"good.test": loopback}}
	c := NewCollector(Async(), IgnoreRobotsTxt(), PolitenessBy(limits.PolitenessIP), Resolver(res), MaxParked(parked))
	var mu sync.Mutex
	dns := 0
	c.OnError(func(_ *Response, err error) {
		if _, ok := errors.AsType[*net.DNSError](err); ok {
			mu.Lock()
			dns++
			mu.Unlock()
		}
	})
	for i := range gone {
		if err := c.Visit(fmt.Sprintf("http://gone.test:%d/p%d", port, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Visit(fmt.Sprintf("http://good.test:%d/", port)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.Stop()
		<-done
		t.Fatal("Wait did not return: the crawl stalled behind the name that does not resolve")
	}
	mu.Lock()
	defer mu.Unlock()
	if dns != gone {
		t.Errorf("OnError heard %d DNS failures, want %d", dns, gone)
	}
	if st := c.Stats(); st.Responses != 1 {
		t.Errorf("Stats().Responses = %d, want 1 (good.test)", st.Responses)
	}
}

// TestPolitenessByIPRobotsResolveFails: with robots.txt obeyed, a name keyed
// by IP that does not resolve fails its request to OnError with the
// lookup's *net.DNSError (the robots.txt fetch found the host unreachable).
func TestPolitenessByIPRobotsResolveFails(t *testing.T) {
	c := NewCollector(PolitenessBy(limits.PolitenessIP), Resolver(&mapResolver{}))
	var got error
	c.OnError(func(_ *Response, err error) { got = err })
	err := c.Visit("http://gone.test/")
	de, ok := errors.AsType[*net.DNSError](got)
	if !ok || de.Name != "gone.test" || !errors.Is(err, limits.ErrResolve) {
		t.Errorf("Visit error = %v, OnError error = %v, want a *net.DNSError for gone.test", err, got)
	}
}

// TestPolitenessByIPDialsKeyedAddress: the connection of a request keyed by
// IP goes to the address keyed: a DialContext of the user's is given it,
// and DenyPrivateNetworks checks it (the name is known to the collector's
// Resolver only).
func TestPolitenessByIPDialsKeyedAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	u := fmt.Sprintf("http://pinned.test:%d/", port)
	res := &mapResolver{addrs: map[string]netip.Addr{"pinned.test": loopback}}

	t.Run("user's dialer", func(t *testing.T) {
		var mu sync.Mutex
		var dialled []string
		var d net.Dialer
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, addr)
			mu.Unlock()
			return d.DialContext(ctx, network, addr)
		}}
		defer tr.CloseIdleConnections()
		c := NewCollector(Resolver(res)) // robots.txt too goes to the address
		c.WithTransport(tr)
		if err := c.Limit(&LimitRule{DomainGlob: "*", PolitenessBy: limits.PolitenessIP}); err != nil {
			t.Fatal(err)
		}
		if err := c.Visit(u); err != nil {
			t.Fatalf("Visit(%q) error = %v", u, err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := fmt.Sprintf("127.0.0.1:%d", port)
		if len(dialled) == 0 || slices.ContainsFunc(dialled, func(a string) bool { return a != want }) {
			t.Errorf("the user's dialer was given %v, want only %s", dialled, want)
		}
	})
	t.Run("guard refuses the keyed address", func(t *testing.T) {
		c := NewCollector(IgnoreRobotsTxt(), Resolver(res), PolitenessBy(limits.PolitenessIP), DenyPrivateNetworks())
		var refused error
		c.OnRefused(func(_ *Request, err error) { refused = err })
		_ = c.Visit(u)
		be, ok := errors.AsType[*BlockedAddressError](refused)
		if !ok || be.Addr != loopback {
			t.Errorf("OnRefused error = %v, want a *BlockedAddressError for 127.0.0.1", refused)
		}
	})
	t.Run("guard allows it", func(t *testing.T) {
		c := NewCollector(IgnoreRobotsTxt(), Resolver(res), PolitenessBy(limits.PolitenessIP),
			DenyPrivateNetworks(netip.MustParsePrefix("127.0.0.0/8")))
		if err := c.Visit(u); err != nil {
			t.Errorf("Visit(%q) error = %v, want nil", u, err)
		}
	})
}

// TestPolitenessDefaultNoLookup: a collector that sets no politeness keys
// each host by itself and looks no name up for it.
func TestPolitenessDefaultNoLookup(t *testing.T) {
	ts := newTestServer(t)
	res := &mapResolver{}
	c := NewCollector(Resolver(res))
	if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 2}); err != nil {
		t.Fatal(err)
	}
	c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(ts.URL + "/"); err != nil {
		t.Fatalf("Visit error = %v", err)
	}
	if ts.total() < 4 {
		t.Fatalf("crawled %d pages, want the site", ts.total())
	}
	if n := res.lookups(); n != 0 {
		t.Errorf("%d lookups by the default politeness, want 0", n)
	}
	if got := c.shared.limiter.Politeness(); got != limits.PolitenessHost {
		t.Errorf("default politeness = %v, want host", got)
	}
}

// TestPolitenessBad: a PolitenessBy that is not a limits constant is an
// error from Limit, and the option keeps the default.
func TestPolitenessBad(t *testing.T) {
	c := NewCollector(PolitenessBy(9), IgnoreRobotsTxt())
	if got := c.shared.limiter.Politeness(); got != limits.PolitenessHost {
		t.Errorf("after PolitenessBy(9), default politeness = %v, want host", got)
	}
	if err := c.Limit(&LimitRule{DomainGlob: "*", PolitenessBy: 9}); !errors.Is(err, limits.ErrBadPoliteness) {
		t.Errorf("Limit(PolitenessBy 9) error = %v, want limits.ErrBadPoliteness", err)
	}
	if n := len(c.shared.limiter.Rules()); n != 0 {
		t.Errorf("%d rules after a bad one, want 0", n)
	}
	// The option's error comes back from the crawl's start, which sends
	// nothing (issue 39: an error value from the option).
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	if err := c.Visit(srv.URL + "/"); !errors.Is(err, limits.ErrBadPoliteness) {
		t.Errorf("Visit after PolitenessBy(9) error = %v, want limits.ErrBadPoliteness", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want 0", n)
	}
	// A later valid PolitenessBy clears it.
	PolitenessBy(limits.PolitenessHost)(c)
	if err := c.Visit(srv.URL + "/"); err != nil {
		t.Errorf("Visit after PolitenessBy(host) error = %v, want nil", err)
	}
	// The parse the command line uses.
	if _, err := limits.ParsePoliteness("nope"); !errors.Is(err, limits.ErrBadPoliteness) {
		t.Errorf("ParsePoliteness(nope) error = %v", err)
	}
}
