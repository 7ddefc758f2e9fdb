package limits

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeResolver answers from a table and counts the lookups of each name;
// a name not in the table does not resolve. A non-nil hold makes every
// lookup wait for it (or for its context).
type fakeResolver struct {
	mu    sync.Mutex
	addrs map[string]string
	calls map[string]int
	hold  chan struct{}
}

func newFakeResolver(addrs map[string]string) *fakeResolver {
	return &fakeResolver{addrs: addrs, calls: map[string]int{}}
}

func (f *fakeResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	f.calls[host]++
	a, ok := f.addrs[host]
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

func (f *fakeResolver) lookups(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}

func (f *fakeResolver) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// TestPolitenessKeys: which slot each host goes to, by the rule's
// PolitenessBy or the Limiter's default; no lookup unless by IP.
func TestPolitenessKeys(t *testing.T) {
	names := map[string]string{"a.test": "192.0.2.1", "b.test": "192.0.2.1", "six.test": "2001:db8::1"}
	tests := []struct {
		name  string
		def   Politeness
		rules []*Rule
		want  map[string]string
	}{
		{"nothing set: by host", PolitenessDefault, nil, map[string]string{
			"a.example.com:80": "a.example.com:80", "a.test:80": "a.test:80", "127.0.0.1:80": "127.0.0.1:80",
		}},
		{"rule of no politeness: by host", PolitenessDefault, []*Rule{{DomainGlob: "*", Delay: time.Second}}, map[string]string{
			"a.example.com:80": "a.example.com:80",
		}},
		{"default domain", PolitenessDomain, nil, map[string]string{
			"a.example.com:80":    "domain:example.com",
			"B.Example.COM:8080":  "domain:example.com",
			"example.com":         "domain:example.com",
			"x.y.example.co.uk":   "domain:example.co.uk",
			"a.example.test":      "domain:example.test",
			"127.0.0.1:8080":      "127.0.0.1:8080",
			"[2001:db8::1]:80":    "[2001:db8::1]:80",
			"localhost:8080":      "localhost:8080",
			"co.uk":               "co.uk",
			"www.example.com.:80": "domain:example.com",
		}},
		{"rule by domain", PolitenessDefault, []*Rule{
			{DomainGlob: "nothing.invalid"},
			{DomainGlob: "*.example.com", PolitenessBy: PolitenessDomain},
		}, map[string]string{
			"a.example.com:80": "domain:example.com#2",
			"other.org:80":     "other.org:80",
		}},
		{"two rules by domain: a slot per rule", PolitenessDefault, []*Rule{
			{DomainGlob: "a.example.com", Delay: time.Second, PolitenessBy: PolitenessDomain},
			{DomainGlob: "*", PolitenessBy: PolitenessDomain},
		}, map[string]string{
			"a.example.com:80": "domain:example.com#1",
			"b.example.com:80": "domain:example.com#2",
		}},
		{"default by IP", PolitenessIP, nil, map[string]string{
			"a.test:80":        "ip:192.0.2.1",
			"b.test:8080":      "ip:192.0.2.1",
			"six.test":         "ip:2001:db8::1",
			"127.0.0.1:8080":   "ip:127.0.0.1",
			"127.0.0.1:9090":   "ip:127.0.0.1",
			"[2001:db8::1]:80": "ip:2001:db8::1",
		}},
		{"rule by host under a default by IP", PolitenessIP, []*Rule{
			{DomainGlob: "a.test", PolitenessBy: PolitenessHost},
			{DomainGlob: "*", Delay: time.Second},
		}, map[string]string{
			"a.test:80": "a.test:80",
			"b.test:80": "ip:192.0.2.1#2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newFakeResolver(names)
			l := newLimiter(t, []Option{WithResolver(r), PolitenessBy(tt.def)}, tt.rules...)
			for host, want := range tt.want {
				k, err := l.keyOf(t.Context(), host)
				if err != nil || k.key != want {
					t.Errorf("key of %q = %q, %v, want %q", host, k.key, err, want)
				}
			}
			if tt.def != PolitenessIP && r.total() != 0 {
				t.Errorf("%d lookups, want none when nothing keys by IP", r.total())
			}
		})
	}
}

// TestPolitenessSharesSlot: hosts on one key take turns in one slot, its
// Delay between any two of their starts; hosts on other keys (or keyed by
// host) do not wait for them.
func TestPolitenessSharesSlot(t *testing.T) {
	const delay = 100 * ms
	names := map[string]string{"a.test": "192.0.2.1", "b.test": "192.0.2.1", "c.test": "192.0.2.2"}
	tests := []struct {
		name   string
		by     Politeness
		shared []string // hosts that must share one Delay
		apart  string   // a host with a slot of its own
	}{
		{"domain", PolitenessDomain, []string{"a.example.com:80", "b.example.com:80", "example.com:8080"}, "a.example.org:80"},
		{"ip", PolitenessIP, []string{"a.test:80", "b.test:443", "192.0.2.1:8080"}, "c.test:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, []Option{WithResolver(newFakeResolver(names))},
					&Rule{DomainGlob: "*", Delay: delay, Parallelism: 4, PolitenessBy: tt.by})
				g := NewGate[req](l, 64)
				defer g.Close()
				rec := simulate(t, g, reqs(4, append(tt.shared, tt.apart)...), 16, fixed(10*ms))
				var all []time.Time
				for _, h := range tt.shared {
					all = append(all, rec.starts[h]...)
				}
				if len(all) != 4*len(tt.shared) {
					t.Fatalf("%d starts to the shared hosts, want %d", len(all), 4*len(tt.shared))
				}
				for i, a := range all {
					for _, b := range all[i+1:] {
						if d := a.Sub(b).Abs(); d < delay {
							t.Fatalf("two starts on one %s %v apart, want >= %v", tt.by, d, delay)
						}
					}
				}
				// The host apart started its first request at once and
				// paced its own.
				if s := rec.starts[tt.apart]; len(s) != 4 || !s[0].Equal(rec.starts[tt.shared[0]][0]) {
					t.Errorf("starts of %s = %v, want its first with the first shared start", tt.apart, s)
				}
			})
		})
	}
	// By host (the default), the same hosts each keep their own Delay.
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "*", Delay: delay})
		g := NewGate[req](l, 64)
		defer g.Close()
		rec := simulate(t, g, reqs(2, "a.example.com:80", "b.example.com:80"), 16, fixed(10*ms))
		if a, b := rec.starts["a.example.com:80"][0], rec.starts["b.example.com:80"][0]; !a.Equal(b) {
			t.Errorf("by host, two hosts of one domain started %v apart, want together", b.Sub(a))
		}
	})
}

// TestPolitenessSharesHoldsAndCrawlDelay: a Retry-After from one host of a
// slot holds the others; the slot's Crawl-delay is the longest of its
// hosts'.
func TestPolitenessSharesHoldsAndCrawlDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, []Option{PolitenessBy(PolitenessDomain)})
		g := NewGate[req](l, 16)
		defer g.Close()
		start := serial(t, g, "a.example.com:80", 0, Result{StatusCode: 200, RetryAfter: 2 * time.Second})
		if got := serial(t, g, "other.org:80", 0, Result{StatusCode: 200}).Sub(start); got != 0 {
			t.Errorf("other.org started %v after a.example.com's Retry-After, want at once", got)
		}
		if got := serial(t, g, "b.example.com:80", 0, Result{StatusCode: 200}).Sub(start); got != 2*time.Second {
			t.Errorf("b.example.com started %v after a.example.com's Retry-After of 2s, want 2s", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, []Option{PolitenessBy(PolitenessDomain)})
		l.SetCrawlDelay("b.example.com:80", 300*ms)
		g := NewGate[req](l, 16)
		defer g.Close()
		rec := simulate(t, g, reqs(3, "a.example.com:80", "b.example.com:80"), 8, fixed(10*ms))
		all := append(rec.starts["a.example.com:80"], rec.starts["b.example.com:80"]...)
		for i, a := range all {
			for _, b := range all[i+1:] {
				if d := a.Sub(b).Abs(); d < 300*ms {
					t.Fatalf("two starts on example.com %v apart, want >= b's Crawl-delay of 300ms", d)
				}
			}
		}
		if m := max(rec.maxHost["a.example.com:80"], rec.maxHost["b.example.com:80"]); m != 1 {
			t.Errorf("most in flight = %d, want 1 under a Crawl-delay", m)
		}
	})
}

// TestPolitenessIPTicketAddr: the Ticket of a request keyed by IP names the
// address keyed; a name is looked up once for all its requests.
func TestPolitenessIPTicketAddr(t *testing.T) {
	r := newFakeResolver(map[string]string{"a.test": "192.0.2.7"})
	l := New(PolitenessBy(PolitenessIP), WithResolver(r))
	g := NewGate[int](l, 16)
	defer g.Close()
	for i := range 3 {
		if err := g.Put(t.Context(), "a.test:80", i); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		_, tk, err := g.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Addr(); got != netip.MustParseAddr("192.0.2.7") {
			t.Errorf("Ticket.Addr() = %v, want 192.0.2.7", got)
		}
		tk.Done(Result{StatusCode: 200})
	}
	if n := r.lookups("a.test"); n != 1 {
		t.Errorf("a.test looked up %d times, want 1", n)
	}
	tk, err := l.Acquire(t.Context(), "a.test:443")
	if err != nil || tk.Addr() != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("Acquire() = %v, %v, want a ticket for 192.0.2.7", tk.Addr(), err)
	}
	tk.Done(Result{})
	// Keyed by host, a Ticket names no address.
	gh := NewGate[int](New(), 16)
	defer gh.Close()
	if err := gh.Put(t.Context(), "a.test:80", 1); err != nil {
		t.Fatal(err)
	}
	if _, tk, err := gh.Get(t.Context()); err != nil || tk.Addr().IsValid() {
		t.Errorf("by host, Ticket.Addr() = %v, %v, want none", tk.Addr(), err)
	}
}

// TestPolitenessIPResolveFails: a name that does not resolve fails Put and
// Acquire with ErrResolve and a *net.DNSError, parks nothing, and is looked
// up once for a burst; a caller that gives up leaves nothing cached.
func TestPolitenessIPResolveFails(t *testing.T) {
	r := newFakeResolver(map[string]string{"a.test": "192.0.2.1"})
	l := New(PolitenessBy(PolitenessIP), WithResolver(r))
	g := NewGate[int](l, 16)
	defer g.Close()
	for range 3 {
		err := g.Put(t.Context(), "gone.test:80", 1)
		if !errors.Is(err, ErrResolve) {
			t.Fatalf("Put(gone.test) error = %v, want ErrResolve", err)
		}
		if de, ok := errors.AsType[*net.DNSError](err); !ok || !de.IsNotFound || de.Name != "gone.test" {
			t.Fatalf("Put(gone.test) error = %v, want a *net.DNSError for gone.test", err)
		}
	}
	if _, err := l.Acquire(t.Context(), "gone.test:80"); !errors.Is(err, ErrResolve) {
		t.Errorf("Acquire(gone.test) error = %v, want ErrResolve", err)
	}
	if n := r.lookups("gone.test"); n != 1 {
		t.Errorf("gone.test looked up %d times, want 1 (the failure kept DNSFailTTL)", n)
	}
	if n := g.Len(); n != 0 {
		t.Errorf("Len() = %d after failed Puts, want 0", n)
	}
	if st := g.Stats(); st.Hosts != 0 {
		t.Errorf("Stats().Hosts = %d, want no slot made for a name that does not resolve", st.Hosts)
	}
	// An error that is not a *net.DNSError is wrapped in one.
	l2 := New(PolitenessBy(PolitenessIP), WithResolver(errResolver{errors.New("resolver down")}))
	_, err := l2.keyOf(t.Context(), "a.test:80")
	if de, ok := errors.AsType[*net.DNSError](err); !ok || !errors.Is(err, ErrResolve) || de.Name != "a.test" {
		t.Errorf("keyOf with a failing resolver = %v, want ErrResolve and a *net.DNSError", err)
	}
	// A context that ends while the name is looked up: its error, not kept.
	synctest.Test(t, func(t *testing.T) {
		r := newFakeResolver(map[string]string{"a.test": "192.0.2.1"})
		r.hold = make(chan struct{})
		l := New(PolitenessBy(PolitenessIP), WithResolver(r))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := l.keyOf(ctx, "a.test:80"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrResolve) {
			t.Errorf("keyOf with an ended context = %v, want its error only", err)
		}
		close(r.hold)
		if k, err := l.keyOf(t.Context(), "a.test:80"); err != nil || k.key != "ip:192.0.2.1" {
			t.Errorf("keyOf after = %q, %v, want ip:192.0.2.1", k.key, err)
		}
	})
}

type errResolver struct{ err error }

func (e errResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, e.err
}

// TestDNSCache: concurrent lookups of a name share one; an answer is kept
// DNSTTL and a failure DNSFailTTL; the cache holds at most DNSCacheSize
// names.
func TestDNSCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newFakeResolver(map[string]string{"a.test": "192.0.2.1"})
		r.hold = make(chan struct{})
		c := &dnsCache{r: r, m: map[string]*dnsEntry{}}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if a, err := c.lookup(t.Context(), "a.test"); err != nil || a != netip.MustParseAddr("192.0.2.1") {
					t.Errorf("lookup(a.test) = %v, %v", a, err)
				}
			})
		}
		synctest.Wait()
		close(r.hold)
		wg.Wait()
		if n := r.lookups("a.test"); n != 1 {
			t.Errorf("8 concurrent lookups asked the resolver %d times, want 1", n)
		}
		time.Sleep(DNSTTL - time.Second)
		_, _ = c.lookup(t.Context(), "a.test")
		_, _ = c.lookup(t.Context(), "gone.test")
		if a, g := r.lookups("a.test"), r.lookups("gone.test"); a != 1 || g != 1 {
			t.Errorf("lookups within the TTLs = %d, %d, want 1, 1", a, g)
		}
		time.Sleep(DNSFailTTL)
		_, _ = c.lookup(t.Context(), "a.test")
		_, _ = c.lookup(t.Context(), "gone.test")
		if a, g := r.lookups("a.test"), r.lookups("gone.test"); a != 2 || g != 2 {
			t.Errorf("lookups past the TTLs = %d, %d, want 2, 2", a, g)
		}
	})
	r := newFakeResolver(map[string]string{})
	c := &dnsCache{r: r, m: map[string]*dnsEntry{}}
	for i := range 3 * DNSCacheSize {
		_, _ = c.lookup(t.Context(), fmt.Sprintf("h%d.test", i))
		if len(c.m) > DNSCacheSize {
			t.Fatalf("cache holds %d names, want at most %d", len(c.m), DNSCacheSize)
		}
	}
}

// TestBadPoliteness: a value that is not one of the constants is an error
// from Add, Init and SetPoliteness, and changes nothing.
func TestBadPoliteness(t *testing.T) {
	l := New()
	err := l.Add(&Rule{DomainGlob: "*"}, &Rule{DomainGlob: "*", PolitenessBy: 9})
	if !errors.Is(err, ErrBadPoliteness) || len(l.Rules()) != 0 {
		t.Errorf("Add(PolitenessBy 9) = %v with %d rules, want ErrBadPoliteness and none added", err, len(l.Rules()))
	}
	if err := (&Rule{DomainGlob: "*", PolitenessBy: 4}).Init(); !errors.Is(err, ErrBadPoliteness) {
		t.Errorf("Init(PolitenessBy 4) = %v, want ErrBadPoliteness", err)
	}
	if err := l.SetPoliteness(7); !errors.Is(err, ErrBadPoliteness) || l.Politeness() != PolitenessHost {
		t.Errorf("SetPoliteness(7) = %v, default %v, want ErrBadPoliteness and host", err, l.Politeness())
	}
	for s, want := range map[string]Politeness{"host": PolitenessHost, "Domain": PolitenessDomain, "ip": PolitenessIP} {
		if p, err := ParsePoliteness(s); err != nil || p != want {
			t.Errorf("ParsePoliteness(%q) = %v, %v, want %v", s, p, err, want)
		}
	}
	for _, s := range []string{"", "ips", "registrable"} {
		if _, err := ParsePoliteness(s); !errors.Is(err, ErrBadPoliteness) {
			t.Errorf("ParsePoliteness(%q) error = %v, want ErrBadPoliteness", s, err)
		}
	}
}
