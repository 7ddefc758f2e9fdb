package magpie

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// collectRound runs a collection and waits, up to a deadline, for a
// finalizer queued by it to run, so that the body finalizers it queued are
// being run too.
func collectRound(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) { close(done) })
	runtime.GC()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no finalizer ran within 30s of a collection")
	}
}

// recycled reports how many buffers the process-wide recycler has handed
// out and how many bytes it holds.
func recycled() (reused, held int) {
	recycledBodies.mu.Lock()
	defer recycledBodies.mu.Unlock()
	return recycledBodies.reused, recycledBodies.bytes
}

// TestRecycledBodiesKeptStayIntact crawls reuseSite's 300 pages twice, 16 at
// a time, with collections forced during the crawls so that the bodies of
// pages nobody keeps are recycled into later pages: every tenth page's
// Body, kept by OnResponse, still holds that page at the end, on the parsed
// and the streamed path; and buffers were recycled, or the test would show
// nothing.
func TestRecycledBodiesKeptStayIntact(t *testing.T) {
	const pages = 300
	srv := reuseSite(t, pages)
	reusedBefore, _ := recycled()
	type kept struct {
		n    int
		body []byte
	}
	var (
		mu   sync.Mutex
		keep []kept
	)
	for round, stream := range []bool{false, true, false} {
		opts := []CollectorOption{Async(true)}
		if stream {
			opts = append(opts, StreamHTML())
		}
		c := NewCollector(opts...)
		if err := c.Limit(&LimitRule{DomainGlob: "*", Parallelism: 16}); err != nil {
			t.Fatal(err)
		}
		var seen int
		c.OnResponse(func(r *Response) {
			n := pageNumber(t, r.Request)
			mu.Lock()
			seen++
			if n%10 == round {
				keep = append(keep, kept{n, r.Body})
			}
			gc := seen%25 == 0
			mu.Unlock()
			if gc {
				runtime.GC()
			}
		})
		c.OnHTML("a[href]", func(e *HTMLElement) { e.Request.Visit(e.Attr("href")) })
		if err := c.Visit(srv.URL + "/p/0"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		if seen != pages {
			t.Fatalf("round %d: %d pages, want %d", round, seen, pages)
		}
		collectRound(t)
		collectRound(t)
	}
	if reused, _ := recycled(); reused == reusedBefore {
		t.Fatal("no body buffer was recycled: the crawls checked nothing")
	}
	for _, k := range keep {
		if want := reusePage(k.n, pages); string(k.body) != want {
			i := 0
			for i < len(k.body) && i < len(want) && k.body[i] == want[i] {
				i++
			}
			t.Errorf("page %d's kept body changed at byte %d of %d: %.40q", k.n, i, len(k.body), k.body[i:])
		}
	}
	if len(keep) != 3*pages/10 {
		t.Errorf("kept %d bodies, want %d", len(keep), 3*pages/10)
	}
}

// TestRecycledBodyShowsNoEarlierPage: a body read into a recycled buffer
// that held another page has only zeros between its end and the buffer's,
// where a caller reslicing up to the capacity would look.
func TestRecycledBodyShowsNoEarlierPage(t *testing.T) {
	for _, exact := range []bool{true, false} {
		// Fill the free list of the body's class with buffers of 0xff:
		// readLimited asks for len+1 bytes, readScratch for len.
		body := strings.Repeat("<p>x</p>", 1000) // 8,000 bytes: class 4
		stale := make([][]byte, 4)
		for i := range stale {
			stale[i] = bytes.Repeat([]byte{0xff}, 4*recycleClass)
			recycledBodies.put(4, stale[i])
		}
		reusedBefore, _ := recycled()
		var got []byte
		var err error
		if exact {
			got, _, err = readLimited(strings.NewReader(body), int64(len(body)), 0)
		} else {
			got, _, err = readScratch(strings.NewReader(body), 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		if reused, _ := recycled(); reused == reusedBefore {
			t.Fatalf("exact %v: the read took no recycled buffer", exact)
		}
		if string(got) != body {
			t.Fatalf("exact %v: body %.40q…, want %.40q…", exact, got, body)
		}
		if tail := got[len(got):cap(got)]; bytes.ContainsFunc(tail, func(r rune) bool { return r != 0 }) {
			t.Errorf("exact %v: %d bytes past the body hold an earlier page", exact, bytes.Count(tail, []byte{0xff}))
		}
	}
}

// TestBodyRecyclerLists checks the free lists' bookkeeping with the
// collection ticks given by hand: a buffer put is got back from its class
// only, one generation on it still is, two generations on it is dropped
// (and the ticks stop), and the lists never hold more than recycleBudget.
func TestBodyRecyclerLists(t *testing.T) {
	var armed int
	r := &bodyRecycler{arm: func() { armed++ }}
	a := make([]byte, 3*recycleClass)
	r.put(3, a)
	if armed != 1 || !r.ticking {
		t.Fatalf("put armed %d ticks (ticking %v), want 1", armed, r.ticking)
	}
	if b := r.get(4); b != nil {
		t.Fatalf("class 4 gave a buffer of %d bytes", len(b))
	}
	if b := r.get(3); &b[0] != &a[0] {
		t.Fatal("class 3 did not give back the buffer put")
	}
	r.put(3, a)
	r.tick() // a is old now
	if armed != 2 {
		t.Fatalf("%d ticks armed after a tick with buffers held, want 2", armed)
	}
	if b := r.get(3); b == nil || &b[0] != &a[0] {
		t.Fatal("a buffer one collection old was not given back")
	}
	r.put(3, a)
	r.tick()
	r.tick() // a is two generations old: dropped
	if r.bytes != 0 || r.ticking {
		t.Fatalf("after two ticks: %d bytes held, ticking %v; want 0, false", r.bytes, r.ticking)
	}
	if b := r.get(3); b != nil {
		t.Fatal("a buffer two collections old was given back")
	}
	big := make([]byte, 64*recycleClass)
	for range recycleBudget/len(big) + 5 {
		r.put(64, big)
	}
	if r.bytes > recycleBudget || len(r.cur[64]) != recycleBudget/len(big) {
		t.Errorf("lists hold %d bytes in %d buffers, budget %d", r.bytes, len(r.cur[64]), recycleBudget)
	}
}

// TestBodyRecyclerEmptiesAfterCrawl: once a crawl is over, a few
// collections leave no buffer held and no collection sentinel armed.
func TestBodyRecyclerEmptiesAfterCrawl(t *testing.T) {
	srv := reuseSite(t, 100)
	c := NewCollector(Async(true))
	c.OnHTML("a[href]", func(e *HTMLElement) { e.Request.Visit(e.Attr("href")) })
	if err := c.Visit(srv.URL + "/p/0"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	collectRound(t)
	if _, held := recycled(); held == 0 {
		t.Fatal("no buffer recycled after the crawl: the test checks nothing")
	}
	for i := 0; ; i++ {
		recycledBodies.mu.Lock()
		held, ticking := recycledBodies.bytes, recycledBodies.ticking
		recycledBodies.mu.Unlock()
		if held == 0 && !ticking {
			break
		}
		if i == 10 {
			t.Fatalf("after %d collections: %d bytes held, ticking %v", i, held, ticking)
		}
		collectRound(t)
	}
}

// TestNewBodyBufferSizes: bodies of 4 KB to 256 KB get a buffer rounded up
// to the next 2 KB (a recycled one when there is one); smaller and larger
// ones get a buffer of their size, never recycled.
func TestNewBodyBufferSizes(t *testing.T) {
	for _, c := range []struct{ n, cap int }{
		{minRecycled - 1, minRecycled - 1},
		{minRecycled, minRecycled},
		{minRecycled + 1, minRecycled + recycleClass},
		{16<<10 + 1, 18 << 10},
		{maxRecycled, maxRecycled},
		{maxRecycled + 1, maxRecycled + 1},
	} {
		b := newBodyBuffer(c.n)
		if len(b) != 0 || cap(b) != c.cap {
			t.Errorf("newBodyBuffer(%d): len %d cap %d, want 0 and %d", c.n, len(b), cap(b), c.cap)
		}
	}
}

// TestBodyRecyclerArmedBound: a program that keeps every body stops
// arming finalizers once armedBudget bytes of kept bodies carry one (its
// bodies are then plain allocations), and the bytes armed go back down as
// the kept bodies are let go and finalized.
func TestBodyRecyclerArmedBound(t *testing.T) {
	collectRound(t)
	collectRound(t)
	start := recycledBodies.armed.Load()
	const size = 16 << 10
	var kept [][]byte
	for range 2 * armedBudget / size {
		kept = append(kept, newBodyBuffer(size))
	}
	if armed := recycledBodies.armed.Load(); armed > armedBudget {
		t.Fatalf("%d bytes armed, budget %d", armed, armedBudget)
	} else if armed-start < armedBudget/2 {
		t.Fatalf("only %d bytes armed by %d kept buffers of %d bytes", armed-start, len(kept), size)
	}
	kept = nil
	for i := 0; recycledBodies.armed.Load() > start; i++ {
		if i == 10 {
			t.Fatalf("after %d collections %d bytes still armed, %d before", i, recycledBodies.armed.Load(), start)
		}
		collectRound(t)
	}
	_ = kept
}
