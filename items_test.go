package magpie

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie/storage"
)

// itemSite serves /p/N pages with two products each, as HTML, and /feed.xml.
func itemSite(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/feed.xml" {
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<feed><entry>x1</entry><entry>x2</entry></feed>`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<h1>%[1]s</h1><p class=product>%[1]s-a</p><p class=product>%[1]s-b</p>`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestItemsFromEveryCallbackInOrder: items emitted from OnResponse, OnHTML,
// OnXML and OnScraped reach the pipeline, in emit order within a page.
func TestItemsFromEveryCallbackInOrder(t *testing.T) {
	srv := itemSite(t)
	c := NewCollector(IgnoreRobotsTxt(), Async())
	c.OnResponse(func(r *Response) { r.Emit("response " + r.Request.URL.Path) })
	c.OnHTML("p.product", func(e *HTMLElement) { e.Emit("html " + e.Text) })
	c.OnXML("//entry", func(e *XMLElement) { e.Emit("xml " + e.Text) })
	c.OnScraped(func(r *Response) { r.Emit("scraped " + r.Request.URL.Path) })
	var mu sync.Mutex
	byPage := map[string][]string{}
	c.Pipeline(func(_ context.Context, it *Item) error {
		mu.Lock()
		defer mu.Unlock()
		byPage[it.Request.URL.Path] = append(byPage[it.Request.URL.Path], it.Value.(string))
		return nil
	})
	for _, p := range []string{"/p/1", "/p/2", "/feed.xml"} {
		if err := c.Visit(srv.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	c.Wait()
	want := map[string][]string{
		"/p/1":      {"response /p/1", "html /p/1-a", "html /p/1-b", "scraped /p/1"},
		"/p/2":      {"response /p/2", "html /p/2-a", "html /p/2-b", "scraped /p/2"},
		"/feed.xml": {"response /feed.xml", "xml x1", "xml x2", "scraped /feed.xml"},
	}
	for p, w := range want {
		if !slices.Equal(byPage[p], w) {
			t.Errorf("items of %s = %v, want %v", p, byPage[p], w)
		}
	}
	if st := c.Stats(); st.ItemsScraped != 12 || st.ItemsDropped != 0 || st.ItemsFailed != 0 {
		t.Errorf("Stats items = %d/%d/%d, want 12 scraped", st.ItemsScraped, st.ItemsDropped, st.ItemsFailed)
	}
}

// TestItemPipelinesDropAndFail: processors run in order; a drop stops the
// item in its pipeline without an error; a failure (or a panic) is counted
// and reported to OnError with the page and the item; each pipeline sees
// every item.
func TestItemPipelinesDropAndFail(t *testing.T) {
	srv := itemSite(t)
	c := NewCollector(IgnoreRobotsTxt())
	c.OnHTML("p.product", func(e *HTMLElement) { e.Emit(map[string]string{"name": e.Text}) })
	errBad := errors.New("bad product")
	var mu sync.Mutex
	var order, second []string
	c.Pipeline(
		func(_ context.Context, it *Item) error { // validate
			name := it.Value.(map[string]string)["name"]
			mu.Lock()
			order = append(order, "validate "+name)
			mu.Unlock()
			switch {
			case strings.HasSuffix(name, "1-b"):
				return fmt.Errorf("duplicate: %w", ErrDropItem)
			case strings.HasSuffix(name, "2-a"):
				return errBad
			case strings.HasSuffix(name, "2-b"):
				panic("processor bug")
			}
			it.Value.(map[string]string)["valid"] = "yes"
			return nil
		},
		func(_ context.Context, it *Item) error { // store
			mu.Lock()
			order = append(order, "store "+it.Value.(map[string]string)["name"])
			mu.Unlock()
			return nil
		},
	)
	c.Pipeline(func(_ context.Context, it *Item) error {
		mu.Lock()
		second = append(second, it.Value.(map[string]string)["name"])
		mu.Unlock()
		return nil
	})
	var failures []error
	c.OnError(func(r *Response, err error) {
		if r.Request.URL.Path != "/p/2" {
			t.Errorf("OnError for %s, want the page of the item", r.Request.URL)
		}
		failures = append(failures, err)
	})
	for _, p := range []string{"/p/1", "/p/2"} {
		if err := c.Visit(srv.URL + p); err != nil {
			t.Fatal(err)
		}
	}
	wantOrder := []string{"validate /p/1-a", "store /p/1-a", "validate /p/1-b", "validate /p/2-a", "validate /p/2-b"}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("processor calls = %v, want %v", order, wantOrder)
	}
	if want := []string{"/p/1-a", "/p/1-b", "/p/2-a", "/p/2-b"}; !slices.Equal(second, want) {
		t.Errorf("second pipeline saw %v, want every item %v", second, want)
	}
	if len(failures) != 2 {
		t.Fatalf("OnError got %v, want 2 item failures", failures)
	}
	var ie *ItemError
	if !errors.As(failures[0], &ie) || !errors.Is(failures[0], errBad) || ie.Item.Value.(map[string]string)["name"] != "/p/2-a" {
		t.Errorf("first failure = %v, want an *ItemError wrapping errBad for /p/2-a", failures[0])
	}
	if !errors.Is(failures[1], ErrCallbackPanic) {
		t.Errorf("second failure = %v, want the processor's panic", failures[1])
	}
	if st := c.Stats(); st.ItemsScraped != 1 || st.ItemsDropped != 1 || st.ItemsFailed != 2 {
		t.Errorf("Stats items scraped/dropped/failed = %d/%d/%d, want 1/1/2", st.ItemsScraped, st.ItemsDropped, st.ItemsFailed)
	}
}

// TestItemsAckAfterPipeline: in a queue run, a page's entry stays leased
// until its items are through the pipeline, so a crash before that fetches
// the page (and emits its items) again.
func TestItemsAckAfterPipeline(t *testing.T) {
	srv := itemSite(t)
	q := storage.NewMemoryQueue(0)
	c := NewCollector(IgnoreRobotsTxt())
	c.OnHTML("p.product", func(e *HTMLElement) { e.Emit(e.Text) })
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	c.Pipeline(func(ctx context.Context, it *Item) error {
		once.Do(func() {
			close(entered)
			<-release
		})
		return nil
	})
	pushURL(t, q, srv.URL+"/p/1")
	done := make(chan error, 1)
	go func() { done <- c.RunQueue(t.Context(), q, 1) }()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the pipeline never got the item")
	}
	l, err := q.Len(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.Leased != 1 {
		t.Errorf("while its items are in the pipeline, the page's entry is %+v, want still leased", l)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("RunQueue error = %v", err)
	}
	if l, _ := q.Len(t.Context()); l.Total() != 0 {
		t.Errorf("after the pipeline, queue = %+v, want empty (acknowledged)", l)
	}
	if st := c.Stats(); st.ItemsScraped != 2 {
		t.Errorf("items scraped = %d, want 2", st.ItemsScraped)
	}
}

// TestSlowPipelineBoundsItems: a slow pipeline holds the crawl back instead
// of letting items pile up: items waiting for the pipeline stay bounded.
func TestSlowPipelineBoundsItems(t *testing.T) {
	srv := itemSite(t)
	c := NewCollector(IgnoreRobotsTxt(), Async(), Workers(4))
	c.OnHTML("a", func(*HTMLElement) {})
	c.OnResponse(func(r *Response) {
		for i := range 50 {
			r.Emit(i)
		}
	})
	var mu sync.Mutex
	gate := make(chan struct{})
	processed := 0
	c.Pipeline(func(ctx context.Context, it *Item) error {
		<-gate
		mu.Lock()
		processed++
		mu.Unlock()
		return nil
	})
	for i := range 40 {
		if err := c.Visit(fmt.Sprintf("%s/p/%d", srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Let one item through at a time and watch how many responses the
	// engine has fetched beyond what the pipeline has taken.
	maxAhead := 0
	for range 200 {
		gate <- struct{}{}
		st := c.Stats()
		mu.Lock()
		ahead := int(st.Responses)*50 - processed
		mu.Unlock()
		maxAhead = max(maxAhead, ahead)
	}
	close(gate)
	c.Wait()
	// What the stages can hold, with Workers(4): the item buffer (16
	// items), one page per analyzer (4), the response buffer (2 x 4 pages)
	// and one page per downloader (4): 16 pages of 50 items. Unbounded, the
	// 40 pages (2,000 items) would all be fetched ahead.
	if limit := 16 + 16*50; maxAhead > limit {
		t.Errorf("items fetched ahead of a slow pipeline = %d, want at most %d", maxAhead, limit)
	}
	if st := c.Stats(); st.ItemsScraped != 2000 {
		t.Errorf("items scraped = %d, want 2000", st.ItemsScraped)
	}
}
