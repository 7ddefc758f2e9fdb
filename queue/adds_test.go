package queue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/magpiecrawl/magpie"

	"github.com/magpiecrawl/magpie/internal/queuetest"
	"github.com/magpiecrawl/magpie/queue"
	"github.com/magpiecrawl/magpie/storage"
)

// TestAddURLDuringRunJoinsBatch runs queuetest.AddsJoinBatch on the
// in-memory queue: AddURL from callbacks is deduplicated, checked against
// the visited set and stored with the page's links before its ack.
func TestAddURLDuringRunJoinsBatch(t *testing.T) {
	queuetest.AddsJoinBatch(t, func(*testing.T) (storage.Queue, storage.Storage) {
		return &queue.InMemoryQueueStorage{MaxSize: queue.DefaultMaxSize}, nil
	})
}

// TestAddURLDuringRunQueueFull checks that AddURL from a callback into a
// full storage returns nil and refuses the request with ErrQueueFull to
// OnRefused and Stats().Refused, as a Visit link is refused, while the
// requests that fit are crawled.
func TestAddURLDuringRunQueueFull(t *testing.T) {
	const added = 6
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/p/") {
			fetched.Add(1)
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/seed" {
			for i := range added {
				fmt.Fprintf(w, `<a href="/p/%d">p</a>`, i)
			}
		}
	}))
	defer srv.Close()
	q, err := queue.New(1, &queue.InMemoryQueueStorage{MaxSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(srv.URL + "/seed"); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector()
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
			t.Errorf("AddURL from OnHTML error = %v, want nil (refused to OnRefused)", err)
		}
	})
	var full atomic.Int64
	c.OnRefused(func(r *magpie.Request, err error) {
		if !errors.Is(err, queue.ErrQueueFull) {
			t.Errorf("OnRefused(%s) error = %v, want ErrQueueFull", r.URL.Path, err)
		}
		full.Add(1)
	})
	if err := runWithin(t, q, c, 2*time.Minute); err != nil {
		t.Fatalf("Run error = %v, want nil", err)
	}
	if full.Load() == 0 {
		t.Fatal("no AddURL was refused with ErrQueueFull")
	}
	if got := fetched.Load() + full.Load(); got != added {
		t.Errorf("pages fetched + refused as full = %d, want %d", got, added)
	}
	if got := c.Stats().Refused[magpie.RefusedQueueFull]; got != uint64(full.Load()) {
		t.Errorf("Stats().Refused[queue_full] = %d, want %d", got, full.Load())
	}
}

// TestAddURLDuringRunFlushedWhenIdle checks that a request added during a
// run from outside any callback, while the only page in flight is blocked,
// is stored and crawled without waiting for that page: the feeder, finding
// nothing to lease, stores what AddURL buffered.
func TestAddURLDuringRunFlushedWhenIdle(t *testing.T) {
	slowStarted, releaseSlow, otherDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			close(slowStarted)
			<-releaseSlow
		case "/other":
			once.Do(func() { close(otherDone) })
		}
		w.Header().Set("Content-Type", "text/html")
	}))
	defer srv.Close()
	q, err := queue.New(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(srv.URL + "/slow"); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	c.SetRequestTimeout(5 * time.Minute) // /slow must stay in flight
	done := make(chan error, 1)
	go func() { done <- q.Run(c) }()
	<-slowStarted
	if err := q.AddURL(srv.URL + "/other"); err != nil {
		t.Fatalf("AddURL(/other) during Run error = %v, want nil", err)
	}
	select {
	case <-otherDone:
	case <-time.After(time.Minute):
		close(releaseSlow)
		t.Fatal("/other, added while /slow was in flight, was not crawled before /slow finished")
	}
	close(releaseSlow)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run error = %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
	}
	if n, err := q.Size(); err != nil || n != 0 {
		t.Errorf("Size() after Run = %d, %v, want 0", n, err)
	}
}

// pushRecorder is an in-memory queue storage that records what is pushed.
type pushRecorder struct {
	*queue.InMemoryQueueStorage
	mu     sync.Mutex
	pushed []string
}

func (p *pushRecorder) Push(ctx context.Context, data ...[]byte) error {
	p.mu.Lock()
	for _, d := range data {
		p.pushed = append(p.pushed, string(d))
	}
	p.mu.Unlock()
	return p.InMemoryQueueStorage.Push(ctx, data...)
}

// TestAddURLDuringRunRefusesFiltered checks that a request AddURL gives a
// run, which the collector's filters refuse for its URL alone (another
// domain, a disallowed URL, a scheme it cannot fetch), is refused to
// OnRefused with the filter's error and never stored, while the allowed
// one is crawled.
func TestAddURLDuringRunRefusesFiltered(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/seed" {
			fmt.Fprint(w, `<a href="http://foreign.invalid/x">f</a><a href="/private/y">p</a><a href="ftp://127.0.0.1/z">s</a><a href="/ok">ok</a>`)
		}
	}))
	defer srv.Close()
	store := &pushRecorder{InMemoryQueueStorage: &queue.InMemoryQueueStorage{MaxSize: queue.DefaultMaxSize}}
	q, err := queue.New(2, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(srv.URL + "/seed"); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.AllowedDomains("127.0.0.1"), magpie.DisallowedURLFilters(regexp.MustCompile("/private/")))
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
			t.Errorf("AddURL error = %v, want nil (refused to OnRefused)", err)
		}
	})
	var mu sync.Mutex
	refused := map[string]error{}
	c.OnRefused(func(r *magpie.Request, err error) {
		mu.Lock()
		refused[r.URL.String()] = err
		mu.Unlock()
	})
	var ok atomic.Bool
	c.OnResponse(func(r *magpie.Response) {
		if r.Request.URL.Path == "/ok" {
			ok.Store(true)
		}
	})
	if err := runWithin(t, q, c, 2*time.Minute); err != nil {
		t.Fatalf("Run error = %v, want nil", err)
	}
	for u, want := range map[string]error{
		"http://foreign.invalid/x": magpie.ErrForbiddenDomain,
		srv.URL + "/private/y":     magpie.ErrForbiddenURL,
		"ftp://127.0.0.1/z":        magpie.ErrUnsupportedScheme,
	} {
		if err := refused[u]; !errors.Is(err, want) {
			t.Errorf("OnRefused(%s) error = %v, want %v", u, err, want)
		}
		store.mu.Lock()
		for _, d := range store.pushed {
			if strings.Contains(d, u) {
				t.Errorf("%s was stored in the queue; want it refused before", u)
			}
		}
		store.mu.Unlock()
	}
	if !ok.Load() {
		t.Error("/ok was not crawled")
	}
	if st := c.Stats(); st.Refused[magpie.RefusedDomain] != 1 {
		t.Errorf("Stats().Refused[domain] = %d, want 1", st.Refused[magpie.RefusedDomain])
	}
}

// TestAddRequestDuringRunUnreadableBody checks that a request added during
// a run whose body cannot be read returns the read error and is not
// stored, and that it does not hold its place: the same request added
// again with a readable body is stored and sent once, not refused as a
// duplicate of the one that failed.
func TestAddRequestDuringRunUnreadableBody(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b := new(strings.Builder)
			_, _ = io.Copy(b, r.Body)
			mu.Lock()
			posts = append(posts, r.URL.Path+" "+b.String())
			mu.Unlock()
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/form">form</a>`)
	}))
	defer srv.Close()
	q, err := queue.New(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddURL(srv.URL + "/seed"); err != nil {
		t.Fatal(err)
	}
	c := magpie.NewCollector(magpie.IgnoreRobotsTxt())
	errRead := errors.New("unreadable body")
	c.OnHTML("a[href]", func(e *magpie.HTMLElement) {
		u := e.Request.AbsoluteURL(e.Attr("href"))
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		post := func(body io.Reader) *magpie.Request {
			return &magpie.Request{URL: p, Method: http.MethodPost, Depth: 2, Body: body, Headers: &http.Header{}, Ctx: magpie.NewContext()}
		}
		if err := q.AddRequest(post(iotest.ErrReader(errRead))); !errors.Is(err, errRead) {
			t.Errorf("AddRequest(unreadable body) error = %v, want %v", err, errRead)
		}
		good := post(strings.NewReader("x"))
		if err := q.AddRequest(good); err != nil {
			t.Errorf("AddRequest(readable body) error = %v, want nil", err)
		}
	})
	c.OnRefused(func(r *magpie.Request, err error) {
		t.Errorf("OnRefused(%s %s) = %v, want no refusal", r.Method, r.URL, err)
	})
	if err := runWithin(t, q, c, time.Minute); err != nil {
		t.Fatalf("Run error = %v, want nil", err)
	}
	if want := []string{"/form x"}; !slices.Equal(posts, want) {
		t.Errorf("POSTs = %q, want %q", posts, want)
	}
}
