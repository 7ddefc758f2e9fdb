package magpie_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magpiecrawl/magpie"
)

// TestCollectorStringAgreesWithStats: fmt.Println(c) prints the requests
// sent and the responses received that Stats reports. A retried page is two
// requests and two responses; String used to count the one admission
// instead ("Requests made: 1 (2 responses)"), as a resumed run printed
// "Requests made: 750 (765 responses)".
func TestCollectorStringAgreesWithStats(t *testing.T) {
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		if hits.Add(1) == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<title>ok</title>")
	}))
	defer site.Close()

	c := magpie.NewCollector(magpie.IgnoreRobotsTxt(),
		magpie.RetryPolicy(magpie.RetryOptions{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	var failed atomic.Int32
	c.OnError(func(_ *magpie.Response, err error) { failed.Add(1) })
	if err := c.Visit(site.URL + "/"); err != nil {
		t.Fatalf("Visit() error = %v", err)
	}
	c.Wait()

	st := c.Stats()
	if st.Requests != 2 || st.Responses != 2 || st.Retries != 1 {
		t.Fatalf("Stats() requests %d, responses %d, retries %d; want 2, 2, 1 (one page tried twice)",
			st.Requests, st.Responses, st.Retries)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("OnError called %d times, want 0 (the retry succeeded)", n)
	}
	want := fmt.Sprintf("Requests made: %d (%d responses) | Callbacks: OnRequest: 0, OnHTML: 0, OnResponse: 0, OnError: 1",
		st.Requests, st.Responses)
	if got := c.String(); got != want {
		t.Errorf("c.String() = %q\nwant          %q (the counts of Stats())", got, want)
	}
}
