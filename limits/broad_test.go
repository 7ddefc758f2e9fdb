package limits

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// gateHostBytes returns the heap a Gate and its Limiter hold per host once
// n hosts under a Parallelism 1, Delay 200 ms rule have each had a request
// start and end (the state a broad crawl keeps for a host between its
// pages), and the goroutines they added.
func gateHostBytes(t *testing.T, n int) (perHost float64, goroutines int) {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("127.%d.%d.%d:8080", 1+i/65536, i/256%256, i%256)
	}
	var before, after runtime.MemStats
	g0 := runtime.NumGoroutine()
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := New()
	if err := l.Add(&Rule{DomainGlob: "*", Parallelism: 1, Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	g := NewGate[*int](l, n)
	ctx := t.Context()
	for i, k := range keys {
		if err := g.Put(ctx, k, &i); err != nil {
			t.Fatalf("Put(%s) error = %v", k, err)
		}
		_, tk, err := g.Get(ctx)
		if err != nil {
			t.Fatalf("Get error = %v", err)
		}
		tk.Sent(time.Now())
		tk.Done(Result{StatusCode: 200})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	goroutines = runtime.NumGoroutine() - g0
	if s := g.Stats(); s.Hosts != n {
		t.Errorf("Gate keeps %d hosts, want %d", s.Hosts, n)
	}
	g.Close()
	runtime.KeepAlive(l)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n), goroutines
}

// TestGatePerHostState: a host that has had its turn costs the Gate a
// stated number of bytes, the same at 2,000 and 20,000 hosts (linear in
// hosts), and neither a goroutine nor a timer: hosts waiting for their
// Delay sit in a heap that one Get's timer serves.
func TestGatePerHostState(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 20,000 hosts")
	}
	// 640 bytes: the host struct (scheduling state, its times, its list
	// links), its map slot and key, with room for the race detector.
	const bound = 640
	var per [2]float64
	for i, n := range []int{2000, 20000} {
		b, gs := gateHostBytes(t, n)
		t.Logf("Gate, %d hosts: %.0f bytes per host", n, b)
		if b > bound {
			t.Errorf("Gate at %d hosts: %.0f bytes per host, want at most %d", n, b, bound)
		}
		if gs > 0 {
			t.Errorf("Gate at %d hosts: %d goroutines more after, want none", n, gs)
		}
		per[i] = b
	}
	if per[1] > 1.25*per[0] {
		t.Errorf("Gate bytes per host grow with hosts: %.0f at 2,000, %.0f at 20,000", per[0], per[1])
	}
}

// TestGateRoomForManyHosts: a crawl of more hosts than the Gate's
// maxParked, each under Delay 200 ms, runs every host at its Delay: the
// Gate makes room for ParkedPerHost items per host, so the feeder, which
// brings each host's requests in runs as a frontier does, never leaves
// hosts without a parked request while their turn comes. With a fixed
// capacity of 64 only about a dozen hosts would have work parked at a time
// and the crawl would take some 15 times longer.
func TestGateRoomForManyHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hosts, perHost, run = 200, 10, 5
		const delay = 200 * time.Millisecond
		l := newLimiter(t, nil, &Rule{DomainGlob: "*", Parallelism: 1, Delay: delay})
		g := NewGate[req](l, 64)
		// Runs of 5 requests of one host, the hosts in turn, twice.
		var qs []req
		for r := 0; r < perHost; r += run {
			for h := range hosts {
				for i := r; i < r+run; i++ {
					qs = append(qs, req{fmt.Sprintf("h%d.example:80", h), i})
				}
			}
		}
		rec := simulate(t, g, qs, 64, fixed(time.Millisecond))
		// The delays allow each host's 10 starts in 9 Delays.
		ideal := (perHost - 1) * delay
		if rec.elapsed > ideal*11/10 {
			t.Errorf("%d hosts × %d requests took %v, want within 10%% of the %v the delays allow", hosts, perHost, rec.elapsed, ideal)
		}
		for h, s := range rec.starts {
			for i := 1; i < len(s); i++ {
				if gap := s[i].Sub(s[i-1]); gap < delay {
					t.Fatalf("host %s: starts %v apart, want at least %v", h, gap, delay)
				}
			}
		}
		if n := g.Len(); n != 0 {
			t.Errorf("Len() = %d after the crawl, want 0", n)
		}
	})
}

// TestGateRoomPerHost: the Gate holds maxParked items while one host has
// items parked, and ParkedPerHost more for each further host that has; a
// Put past that blocks until a Get makes room.
func TestGateRoomPerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, nil, &Rule{DomainGlob: "a.com", Delay: time.Hour})
		g := NewGate[req](l, 2)
		ctx := t.Context()
		put := func(host string, n int) {
			t.Helper()
			if err := g.Put(ctx, host, req{host, n}); err != nil {
				t.Fatalf("Put(%s, %d) error = %v", host, n, err)
			}
		}
		put("a.com", 0)
		if _, _, err := g.Get(ctx); err != nil { // a.com now waits an hour
			t.Fatalf("Get() error = %v", err)
		}
		put("a.com", 1)
		put("b.com", 0) // a second host with items parked: room for 2 + ParkedPerHost
		for i := 1; i < 1+ParkedPerHost; i++ {
			put("b.com", i)
		}
		if n, want := g.Len(), 2+ParkedPerHost; n != want {
			t.Fatalf("Len() = %d, want %d", n, want)
		}
		putDone := make(chan error, 1)
		go func() { putDone <- g.Put(ctx, "c.com", req{"c.com", 0}) }()
		synctest.Wait()
		select {
		case err := <-putDone:
			t.Fatalf("Put past maxParked + ParkedPerHost returned %v, want it to block", err)
		default:
		}
		if q, _, err := g.Get(ctx); err != nil || q != (req{"b.com", 0}) {
			t.Fatalf("Get() = %v, %v; want b.com 0", q, err)
		}
		synctest.Wait()
		select {
		case err := <-putDone:
			if err != nil {
				t.Fatalf("Put() error = %v after Get made room, want nil", err)
			}
		default:
			t.Fatal("Put still blocked after Get made room")
		}
	})
}
