package magpie

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/magpiecrawl/magpie/storage"
)

// TestItemsFromOnError: an item emitted by OnError (a failed page recorded
// as an item) reaches the pipelines with its request, in memory and in a
// queue run, and the page is finished once (Stats counts the failure).
func TestItemsFromOnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			http.Error(w, "gone", http.StatusGone)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<a href="/gone">x</a>`))
	}))
	t.Cleanup(srv.Close)
	for _, mode := range []string{"visit", "queue"} {
		t.Run(mode, func(t *testing.T) {
			c := NewCollector(IgnoreRobotsTxt(), Async())
			c.OnHTML("a[href]", func(e *HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
			c.OnError(func(r *Response, err error) {
				if he, ok := errors.AsType[*HTTPError](err); ok {
					r.Emit(he.StatusCode)
				}
			})
			var mu sync.Mutex
			var got []string
			c.Pipeline(func(_ context.Context, it *Item) error {
				mu.Lock()
				defer mu.Unlock()
				if code, ok := it.Value.(int); ok {
					got = append(got, it.Request.URL.Path+" "+http.StatusText(code))
				}
				return nil
			})
			if mode == "visit" {
				if err := c.Visit(srv.URL + "/"); err != nil {
					t.Fatal(err)
				}
				c.Wait()
			} else {
				q := storage.NewMemoryQueue(0)
				defer q.Close()
				pushURL(t, q, srv.URL+"/")
				if err := c.RunQueue(t.Context(), q, 2); err != nil {
					t.Fatal(err)
				}
			}
			if want := []string{"/gone Gone"}; !slices.Equal(got, want) {
				t.Errorf("items from OnError = %q, want %q", got, want)
			}
			if s := c.Stats(); s.ItemsScraped != 1 {
				t.Errorf("Stats().ItemsScraped = %d, want 1", s.ItemsScraped)
			}
		})
	}
}
