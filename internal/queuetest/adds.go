// Package queuetest holds the crawl tests that every queue storage runs
// through queue.Queue (the memory queue, storage/sqlitestore and
// storage/redisstore each call them from their own tests).
package queuetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
)

// Stores opens a fresh queue storage and the visited set the Collector
// uses with it (nil: the Collector's default in-memory one).
type Stores func(t *testing.T) (storage.Queue, storage.Storage)

// leaves is how many link-less pages are queued behind /seed, so that the
// queue never runs dry (which makes the feeder flush added requests early)
// while /seed's callbacks run.
const leaves = 40

// AddsJoinBatch crawls, with queue.AddURL called from OnHTML as Colly
// programs do, a site where /seed adds /a and /b and visits /v; /a adds /x
// twice and /seed (visited) once; /b adds /x and /seed. It checks that no
// duplicate is stored (each URL pushed once), that duplicates and visited
// URLs reach OnRefused as visited, that /seed's added URLs are pushed in
// the same round trip as its Visit link, and that every page's added URLs
// are pushed before the page is acknowledged.
func AddsJoinBatch(t *testing.T, open Stores) {
	var mu sync.Mutex
	fetched := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetched[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/seed":
			fmt.Fprint(w, `<a class="add" href="/a">a</a><a class="add" href="/b">b</a><a class="visit" href="/v">v</a>`)
		case "/a":
			fmt.Fprint(w, `<a class="add" href="/x">x</a><a class="add" href="/x#again">x</a><a class="add" href="/seed">s</a>`)
		case "/b":
			fmt.Fprint(w, `<a class="add" href="/x">x</a><a class="add" href="/seed">s</a>`)
		default:
			fmt.Fprint(w, `<p>leaf</p>`)
		}
	}))
	defer srv.Close()

	qs, st := open(t)
	rec := &recorder{Queue: qs}
	q, err := queue.New(1, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{"/seed"}, leafPaths()...) {
		if err := q.AddURL(srv.URL + p); err != nil {
			t.Fatalf("AddURL(%s) before Run error = %v", p, err)
		}
	}
	c := magpie.NewCollector()
	if st != nil {
		if err := c.SetStorage(st); err != nil {
			t.Fatal(err)
		}
	}
	c.OnHTML("a.add", func(e *magpie.HTMLElement) {
		if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
			t.Errorf("AddURL(%s) from OnHTML error = %v, want nil", e.Attr("href"), err)
		}
	})
	c.OnHTML("a.visit", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	var refusedMu sync.Mutex
	var refused []string
	c.OnRefused(func(r *magpie.Request, err error) {
		refusedMu.Lock()
		defer refusedMu.Unlock()
		if _, ok := errors.AsType[*magpie.AlreadyVisitedError](err); !ok {
			t.Errorf("OnRefused(%s) error = %v, want *AlreadyVisitedError", r.URL.Path, err)
		}
		refused = append(refused, r.URL.Path)
	})
	done := make(chan error, 1)
	go func() { done <- q.Run(c) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run error = %v, want nil", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return")
	}

	mu.Lock()
	for _, p := range []string{"/seed", "/a", "/b", "/v", "/x"} {
		if fetched[p] != 1 {
			t.Errorf("fetches of %s = %d, want 1", p, fetched[p])
		}
	}
	mu.Unlock()
	pushes := rec.pushCounts()
	for _, p := range []string{"/a", "/b", "/v", "/x"} {
		if pushes[p] != 1 {
			t.Errorf("entries pushed for %s = %d, want 1 (no duplicate stored)", p, pushes[p])
		}
	}
	if pushes["/seed"] != 1 {
		t.Errorf("entries pushed for /seed = %d, want 1 (the AddURL before Run)", pushes["/seed"])
	}
	slices.Sort(refused)
	if want := []string{"/seed", "/seed", "/x", "/x"}; !slices.Equal(refused, want) {
		t.Errorf("OnRefused got %v, want %v", refused, want)
	}
	if got := c.Stats().Refused[magpie.RefusedVisited]; got != 4 {
		t.Errorf("Stats().Refused[visited] = %d, want 4", got)
	}
	if !rec.pushedTogether("/a", "/b", "/v") {
		t.Errorf("/seed's AddURL links and its Visit link were not pushed in one round trip: pushes %v", rec.pushLog())
	}
	for page, adds := range map[string][]string{"/seed": {"/a", "/b"}, "/a": {"/x"}} {
		if err := rec.storedBeforeAck(page, adds); err != nil {
			t.Error(err)
		}
	}
	if n, err := q.Size(); err != nil || n != 0 {
		t.Errorf("Size() after Run = %d, %v, want 0", n, err)
	}
}

func leafPaths() []string {
	var ps []string
	for i := range leaves {
		ps = append(ps, fmt.Sprintf("/leaf/%d", i))
	}
	return ps
}

// recorder is a storage.Queue that logs the paths of the entries pushed and
// the order of pushes and acknowledgements. It hides the optional
// interfaces of the queue it wraps, so that every push (PushUnvisited's
// too) goes through Push.
type recorder struct {
	storage.Queue
	// mu guards the fields below.
	mu     sync.Mutex
	events []event
	leased map[string]string // lease ID → path
}

// event is one Push (paths) or one Ack (paths of the entries acknowledged).
type event struct {
	push  bool
	paths []string
}

func entryPath(data []byte) string {
	var e struct{ URL string }
	if err := json.Unmarshal(data, &e); err != nil {
		return "?"
	}
	if i := strings.Index(e.URL, "://"); i >= 0 {
		rest := e.URL[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			p := rest[j:]
			if k := strings.IndexByte(p, '#'); k >= 0 {
				p = p[:k]
			}
			return p
		}
	}
	return e.URL
}

func (r *recorder) Push(ctx context.Context, data ...[]byte) error {
	if err := r.Queue.Push(ctx, data...); err != nil {
		return err
	}
	ev := event{push: true}
	for _, d := range data {
		ev.paths = append(ev.paths, entryPath(d))
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return nil
}

func (r *recorder) Lease(ctx context.Context, n int, ttl time.Duration) ([]storage.Entry, error) {
	es, err := r.Queue.Lease(ctx, n, ttl)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leased == nil {
		r.leased = map[string]string{}
	}
	for _, e := range es {
		r.leased[e.ID] = entryPath(e.Data)
	}
	return es, err
}

func (r *recorder) Ack(ctx context.Context, ids ...string) error {
	r.mu.Lock()
	ev := event{}
	for _, id := range ids {
		ev.paths = append(ev.paths, r.leased[id])
	}
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return r.Queue.Ack(ctx, ids...)
}

func (r *recorder) pushCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, ev := range r.events {
		if ev.push {
			for _, p := range ev.paths {
				n[p]++
			}
		}
	}
	return n
}

func (r *recorder) pushLog() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var log [][]string
	for _, ev := range r.events {
		if ev.push {
			log = append(log, ev.paths)
		}
	}
	return log
}

// pushedTogether reports whether one Push carried all of paths.
func (r *recorder) pushedTogether(paths ...string) bool {
	for _, ps := range r.pushLog() {
		if !slices.ContainsFunc(paths, func(p string) bool { return !slices.Contains(ps, p) }) {
			return true
		}
	}
	return false
}

// storedBeforeAck checks that every path of adds was pushed before page's
// entry was acknowledged.
func (r *recorder) storedBeforeAck(page string, adds []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pushed := map[string]bool{}
	for _, ev := range r.events {
		if ev.push {
			for _, p := range ev.paths {
				pushed[p] = true
			}
			continue
		}
		if slices.Contains(ev.paths, page) {
			for _, a := range adds {
				if !pushed[a] {
					return fmt.Errorf("%s was acknowledged before %s, which its callbacks added, was stored", page, a)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("%s was never acknowledged", page)
}
