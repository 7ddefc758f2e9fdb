package queue_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
)

// A page whose links overflow a small MaxSize: the links that fit are
// pushed, each of the others is refused once with ErrQueueFull, the page is
// acknowledged and Run returns. (It used to put the page back, fetch it
// again and again, and never return.)
func TestRunQueueFullRefusesLinksOnce(t *testing.T) {
	const links, maxSize = 50, 10
	s := newTestServer(t, func(n int) []int {
		if n != 0 {
			return nil
		}
		out := make([]int, links)
		for i := range out {
			out[i] = i + 1
		}
		return out
	})
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(href(e)) })
	var mu sync.Mutex
	refused := map[string]int{}
	c.OnRefused(func(r *magpie.Request, err error) {
		if !errors.Is(err, magpie.ErrQueueFull) {
			t.Errorf("OnRefused(%s) error = %v, want ErrQueueFull", r.URL, err)
		}
		mu.Lock()
		refused[r.URL.Path]++
		mu.Unlock()
	})
	q := mustNew(t, 1, &queue.InMemoryQueueStorage{MaxSize: maxSize})
	mustAddURL(t, q, s.page(0))
	if err := runWithin(t, q, c, 60*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	f := s.fetches()
	if f["/p/0"] != 1 {
		t.Errorf("hub fetched %d times, want 1", f["/p/0"])
	}
	// The hub's own entry holds one place while its links are stored.
	if got := len(f) - 1; got != maxSize-1 {
		t.Errorf("links fetched = %d, want %d", got, maxSize-1)
	}
	for p, n := range f {
		if n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := len(refused), links-(maxSize-1); got != want {
		t.Errorf("links refused = %d, want %d", got, want)
	}
	for p, n := range refused {
		if n != 1 {
			t.Errorf("%s refused %d times, want once", p, n)
		}
		if f[p] != 0 {
			t.Errorf("%s refused and fetched", p)
		}
	}
	if got := c.Stats().Refused[magpie.RefusedQueueFull]; got != uint64(len(refused)) {
		t.Errorf("Stats().Refused[%q] = %d, want %d", magpie.RefusedQueueFull, got, len(refused))
	}
	if !q.IsEmpty() {
		t.Error("queue not empty after Run")
	}
}

// MaxRequests over a large in-memory queue: Run returns once the budget is
// spent, and the entries it never leased stay in the queue, neither refused
// nor deleted. (It used to lease, refuse and acknowledge every one of
// them: 18 to 42 s for a million.)
func TestRunMaxRequestsLeavesTheRest(t *testing.T) {
	const entries, budget = 200_000, 500
	s := newTestServer(t, nil)
	st := &queue.InMemoryQueueStorage{}
	batch := make([][]byte, 0, 1000)
	for i := range entries {
		r, err := http.NewRequest(http.MethodGet, s.page(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := (&magpie.Request{URL: r.URL, Method: http.MethodGet, Depth: 1}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, b)
		if len(batch) == cap(batch) || i == entries-1 {
			if err := st.Push(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt(), magpie.MaxRequests(budget))
	var refusals atomic.Int64
	c.OnRefused(func(*magpie.Request, error) { refusals.Add(1) })
	q := mustNew(t, 8, st)
	// Generous: a loaded machine under -race. Refusing each entry took
	// far longer, and would leave no entry in the queue.
	if err := runWithin(t, q, c, 120*time.Second); err != nil {
		t.Fatalf("Run() error = %v, want nil", err)
	}
	if got := s.total(); got != budget {
		t.Errorf("fetches = %d, want %d", got, budget)
	}
	if n := refusals.Load(); n != 0 {
		t.Errorf("OnRefused calls = %d, want 0: the entries past the budget are not refused", n)
	}
	if n, err := q.Size(); err != nil || n != entries-budget {
		t.Errorf("Size() = %d, %v, want %d", n, err, entries-budget)
	}
}
