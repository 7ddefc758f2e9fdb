package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
	"github.com/magpiecrawl/magpie/storage/storagetest"
)

func TestVisitedTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	prefix := randomPrefix()
	a := newTestStore(t, Options{Prefix: prefix, VisitedTTL: ttl})
	b := newTestStore(t, Options{Prefix: prefix, VisitedTTL: ttl})
	ctx := t.Context()

	got, err := a.AddVisited(ctx, 1, 2)
	if err != nil || !got[0] || !got[1] {
		t.Fatalf("AddVisited(1, 2) = %v, %v; want [true true], nil", got, err)
	}
	if got, err := b.AddVisited(ctx, 1, 3); err != nil || got[0] || !got[1] {
		t.Fatalf("other Store AddVisited(1, 3) = %v, %v; want [false true], nil", got, err)
	}
	if ok, err := b.IsVisited(2); !ok || err != nil {
		t.Fatalf("IsVisited(2) = %v, %v; want true, nil", ok, err)
	}
	if err := a.RemoveVisited(ctx, 3); err != nil {
		t.Fatalf("RemoveVisited(3) error = %v", err)
	}
	if ok, _ := a.IsVisited(3); ok {
		t.Errorf("IsVisited(3) after RemoveVisited = true, want false")
	}
	if !eventually(t, 30*time.Second, func() bool { ok, err := a.IsVisited(1); return err == nil && !ok }) {
		t.Fatalf("IsVisited(1) still true long after its TTL (%v)", ttl)
	}
	if got, err := b.AddVisited(ctx, 1); err != nil || !got[0] {
		t.Errorf("AddVisited(1) after its mark expired = %v, %v; want [true], nil", got, err)
	}
	// Without a TTL marks stay.
	p := newTestStore(t, Options{})
	if _, err := p.AddVisited(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := p.rdb.TTL(ctx, p.visitedKey(1)).Result(); err != nil || n != -1 {
		t.Errorf("TTL of a mark without VisitedTTL = %v, %v; want -1 (none)", n, err)
	}
	if _, err := New(Options{Addr: redisAddr(t), VisitedTTL: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("New(VisitedTTL < 0) error = %v, want ErrInvalidArgument", err)
	}
}

func TestStorageBeforeInit(t *testing.T) {
	s := &Storage{Address: "127.0.0.1:1"}
	if _, err := s.IsVisited(1); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("IsVisited before Init error = %v, want ErrNotInitialized", err)
	}
	if err := s.Push(t.Context(), []byte("x")); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Push before Init error = %v, want ErrNotInitialized", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close before Init error = %v, want nil", err)
	}
}

// TestCollyStorageRecrawl is a Colly feed program moved over: the
// redisstorage.Storage literal (Address, Prefix, Expires) serves as the
// collector's storage and the queue's, and a page crawled in one round is
// refused in the next until its mark expires, then fetched again.
func TestCollyStorageRecrawl(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/feed" {
			fmt.Fprint(w, `<a href="/item/1">1</a><a href="/item/2">2</a>`)
		}
	}))
	t.Cleanup(site.Close)
	prefix := randomPrefix()
	const expires = 500 * time.Millisecond
	round := func() (fetched, refused int) {
		t.Helper()
		s := &Storage{Address: redisAddr(t), Prefix: prefix, Expires: expires}
		c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
		if err := c.SetStorage(s); err != nil {
			t.Fatalf("SetStorage(&Storage{...}) error = %v", err)
		}
		defer s.Close()
		c.OnHTML("a[href]", func(e *magpie.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
		c.OnResponse(func(*magpie.Response) { fetched++ })
		c.OnRefused(func(*magpie.Request, error) { refused++ })
		q, err := queue.New(1, s)
		if err != nil {
			t.Fatalf("queue.New(1, &Storage{...}) error = %v", err)
		}
		if err := q.AddURL(site.URL + "/feed"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := q.RunContext(ctx, c); err != nil {
			t.Fatalf("Run() error = %v", err)
		}
		return fetched, refused
	}
	t.Cleanup(func() {
		s, err := New(Options{Addr: redisAddr(t), Prefix: prefix})
		if err == nil {
			_ = s.Clear(context.Background())
			s.Close()
		}
	})
	if f, r := round(); f != 3 || r != 0 {
		t.Fatalf("first round fetched %d, refused %d; want 3, 0", f, r)
	}
	if f, r := round(); f != 0 || r != 1 {
		t.Errorf("round right after fetched %d, refused %d; want 0, 1 (the feed's mark has not expired)", f, r)
	}
	probe, err := New(Options{Addr: redisAddr(t), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if !eventually(t, 30*time.Second, func() bool {
		keys, err := probe.rdb.Keys(context.Background(), prefix+":vt:*").Result()
		return err == nil && len(keys) == 0
	}) {
		t.Fatalf("visited marks did not expire")
	}
	if f, r := round(); f != 3 || r != 0 {
		t.Errorf("round after the marks expired fetched %d, refused %d; want 3, 0", f, r)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/feed"] != 2 {
		t.Errorf("server saw /feed %d times, want 2", hits["/feed"])
	}
}

// TestConformanceVisitedTTL runs the visited-set suite on expiring marks
// (with a TTL far longer than the suite).
func TestConformanceVisitedTTL(t *testing.T) {
	redisAddr(t)
	storagetest.RunVisited(t, func(t *testing.T) storage.VisitedSet {
		return newTestStore(t, Options{VisitedTTL: time.Hour})
	})
}

// With expiring marks, PushUnvisited looks at those marks (not the sets of
// permanent ones), on one stream and on a partitioned frontier: a queue
// run's links to pages it fetched are not pushed again.
func TestPushUnvisitedTTL(t *testing.T) {
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) {
			s := newTestStore(t, Options{VisitedTTL: time.Hour, Partitions: parts})
			ctx := t.Context()
			if _, err := s.AddVisited(ctx, 1); err != nil {
				t.Fatal(err)
			}
			got, err := s.PushUnvisited(ctx, []uint64{1, 2}, [][]byte{[]byte(`{"URL":"http://a.test/1"}`), []byte(`{"URL":"http://b.test/2"}`)})
			if err != nil || len(got) != 2 || got[0] || !got[1] {
				t.Fatalf("PushUnvisited(visited 1, new 2) = %v, %v; want [false true], nil", got, err)
			}
			n, err := s.Len(ctx)
			if err != nil || n.Ready != 1 {
				t.Errorf("Len() after pushing one = %+v, %v; want 1 ready", n, err)
			}
		})
	}
}

// TestCollyStorageCookieAttributes: c.Cookies over a Colly Storage literal
// gives the cookies with their attributes, as Colly's redisstorage does
// ("a=b; Path=/; HttpOnly"), and the jar still sends only name=value.
func TestCollyStorageCookieAttributes(t *testing.T) {
	sent := make(chan string, 1)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			http.SetCookie(w, &http.Cookie{Name: "a", Value: "b", Path: "/", HttpOnly: true})
		case "/get":
			sent <- r.Header.Get("Cookie")
		}
	}))
	t.Cleanup(site.Close)
	s := &Storage{Address: redisAddr(t), Prefix: randomPrefix()}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	if err := c.SetStorage(s); err != nil {
		t.Fatalf("SetStorage(&Storage{...}) error = %v", err)
	}
	t.Cleanup(func() {
		_ = s.Clear(context.Background())
		s.Close()
	})
	if err := c.Visit(site.URL + "/set"); err != nil {
		t.Fatalf("Visit(/set) error = %v", err)
	}
	got := c.Cookies(site.URL + "/")
	if len(got) != 1 || got[0].String() != "a=b; Path=/; HttpOnly" || got[0].Path != "/" || !got[0].HttpOnly {
		t.Fatalf("Cookies(%q) = %v, want [a=b; Path=/; HttpOnly]", site.URL, got)
	}
	if err := c.Visit(site.URL + "/get"); err != nil {
		t.Fatalf("Visit(/get) error = %v", err)
	}
	if h := <-sent; h != "a=b" {
		t.Errorf("Cookie header sent = %q, want %q", h, "a=b")
	}
}
